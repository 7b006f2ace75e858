"""System calls a candidate's worker may not make: the asynchronous I/O interfaces (aio's ``io_setup`` and
``io_submit``, ``io_uring_setup``), and sockets of a network family (TCP, UDP). Their requests and connections keep
timers armed in the kernel while the candidate is stopped, where no listing of its processes shows them: a timerfd an
aio poll waits on is held by the request once its descriptor is closed, and an aio context whose ring is unmapped or
covered by another mapping leaves no trace in ``/proc/PID/maps`` (tests/test_judge_attacks_round26.py: a forged 2.5x
credited 2.5x); thousands of loopback TCP connections paced by the kernel (``SO_MAX_PACING_RATE``) send from their own
timers, on the core that armed them, with the whole loopback path in softirq there (round 27: work beside them
1.6-2.1x slower at 5-8 interrupts a ms). A kernel's worker needs none of them. A seccomp filter, installed in the
candidate's process before it runs any code (``install``, from the judge's ``preexec_fn``) and inherited by every
process it starts, answers the first with ENOSYS, which a library meets as a kernel without them, and a network
socket with EACCES (unix sockets and pipes stay). runners/armed.py still counts what can be counted, for a kernel
without seccomp.

The filter is built here, in the judge, and only installed in the child between fork and exec (no allocation there).
It is installed with ``SECCOMP_FILTER_FLAG_SPEC_ALLOW``: where the kernel's speculative store bypass mitigation is
"prctl and seccomp" (its default on most hosts), a filter installed without it turns that mitigation on for the
candidate's process alone, and its host code runs slower than the oracle's (the H200, 2026-12-03: the baseline against
itself read 0.86-0.88x at T=1, its host time per call 23 % higher on the candidate's side). The filter keeps the
candidate off kernel interfaces, not off the speculation of its own process.
"""
from __future__ import annotations

import ctypes
import os
import struct

_ARCH = {  # the audit arch, the calls' numbers (x86_64 also refuses the x32 numbers, above 0x40000000), socket's
    "x86_64": (0xC000003E, (206, 209, 425), 41),  # io_setup, io_submit, io_uring_setup; socket
    "aarch64": (0xC00000B7, (0, 2, 425), 198),
}.get(os.uname().machine)
_NET_FAMILIES = (2, 10)  # AF_INET, AF_INET6: a socket of these families the worker may not make (AF_UNIX it may)
_X32_BIT = 0x40000000
_NR_SECCOMP = {"x86_64": 317, "aarch64": 277}.get(os.uname().machine)
_PR_SET_NO_NEW_PRIVS, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_SPEC_ALLOW = 38, 1, 4
_RET_ALLOW, _RET_ENOSYS, _RET_EACCES = 0x7FFF0000, 0x00050000 | 38, 0x00050000 | 13  # SECCOMP_RET_ERRNO | errno
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


def _program() -> bytes:
    """The filter: another architecture's calls (a 64-bit worker makes none) and the listed ones get ENOSYS; a socket
    of a network family, EACCES."""
    arch, numbers, socket_nr = _ARCH
    code = [(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            (_JEQ_K, 1, 0, arch),
            (_RET_K, 0, 0, _RET_ENOSYS),
            (_LD_W_ABS, 0, 0, 0)]  # seccomp_data.nr
    # the layout from here: [x32 check] [one JEQ a number] [JEQ socket] ALLOW ENOSYS [LD family] [JEQ a family] ALLOW
    # EACCES
    allow_at = len(code) + 1 + len(numbers) + 1
    deny_at = allow_at + 1
    family_at = deny_at + 1
    eacces_at = family_at + 1 + len(_NET_FAMILIES) + 1
    if os.uname().machine == "x86_64":
        code.append((_JGE_K, deny_at - len(code) - 1, 0, _X32_BIT))
    else:
        code.append((_JGE_K, 0, 0, 0xFFFFFFFF))  # never true: keeps the jump offsets alike
    for nr in numbers:
        code.append((_JEQ_K, deny_at - len(code) - 1, 0, nr))
    code.append((_JEQ_K, family_at - len(code) - 1, 0, socket_nr))
    code += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ENOSYS)]
    code.append((_LD_W_ABS, 0, 0, 16))  # seccomp_data.args[0], its low word: the socket's family
    for family in _NET_FAMILIES:
        code.append((_JEQ_K, eacces_at - len(code) - 1, 0, family))
    code += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EACCES)]
    assert len(code) == eacces_at + 1 and code[deny_at][3] == _RET_ENOSYS and code[allow_at][3] == _RET_ALLOW
    return b"".join(struct.pack("HBBI", *ins) for ins in code)


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


if _ARCH is not None and os.uname().sysname == "Linux":
    _CODE = ctypes.create_string_buffer(_program())
    _PROG = _Prog(len(_CODE.raw) // 8, ctypes.cast(_CODE, ctypes.c_void_p))
    _LIBC = ctypes.CDLL(None, use_errno=True)
else:  # pragma: no cover - another system: runners/armed.py's counts alone
    _PROG = _LIBC = None


def install() -> bool:
    """In the candidate's process before exec: install the filter (for it and everything it starts). False where it
    cannot be installed (another system, a kernel without seccomp): the judge's counts still hold what they can."""
    if _PROG is None:
        return False
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    prog = ctypes.byref(_PROG)
    if _LIBC.syscall(_NR_SECCOMP, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_SPEC_ALLOW, prog) == 0:
        return True  # without the speculation mitigation a filter would otherwise force (the docstring above)
    return _LIBC.syscall(_NR_SECCOMP, _SECCOMP_SET_MODE_FILTER, 0, prog) == 0  # a kernel before 4.17: no such flag
