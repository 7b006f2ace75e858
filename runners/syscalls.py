"""System calls a candidate's worker may not make: the asynchronous I/O interfaces (aio's ``io_setup`` and
``io_submit``, ``io_uring_setup``). Their requests keep timers and files armed in the kernel while the candidate is
stopped, where no listing of its processes shows them: a timerfd an aio poll waits on is held by the request once its
descriptor is closed, and an aio context whose ring is unmapped or covered by another mapping leaves no trace in
``/proc/PID/maps`` (tests/test_judge_attacks_round26.py: a forged 2.5x credited 2.5x). A seccomp filter, installed in
the candidate's process before it runs any code (``install``, from the judge's ``preexec_fn``) and inherited by every
process it starts, answers them with ENOSYS, which a library meets as a kernel without them. runners/armed.py still
counts what can be counted, for a kernel without seccomp.

The filter is built here, in the judge, and only installed in the child between fork and exec (no allocation there).
"""
from __future__ import annotations

import ctypes
import os
import struct

_ARCH = {  # the audit arch, and the calls' numbers (x86_64 also refuses the x32 numbers, above 0x40000000)
    "x86_64": (0xC000003E, (206, 209, 425)),  # io_setup, io_submit, io_uring_setup
    "aarch64": (0xC00000B7, (0, 2, 425)),
}.get(os.uname().machine)
_X32_BIT = 0x40000000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ENOSYS = 0x7FFF0000, 0x00050000 | 38  # SECCOMP_RET_ERRNO | ENOSYS
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


def _program() -> bytes:
    """The filter: another architecture's calls (a 64-bit worker makes none) and the listed ones get ENOSYS."""
    arch, numbers = _ARCH
    code = [(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            (_JEQ_K, 1, 0, arch),
            (_RET_K, 0, 0, _RET_ENOSYS),
            (_LD_W_ABS, 0, 0, 0)]  # seccomp_data.nr
    deny_at = len(code) + len(numbers) + 2  # the index of the final RET ENOSYS
    if os.uname().machine == "x86_64":
        code.append((_JGE_K, deny_at - len(code) - 1, 0, _X32_BIT))
    else:
        code.append((_JGE_K, 0, 0, 0xFFFFFFFF))  # never true: keeps the jump offsets alike
    for nr in numbers:
        code.append((_JEQ_K, deny_at - len(code) - 1, 0, nr))
    code += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ENOSYS)]
    assert len(code) == deny_at + 1
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
    return _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(_PROG), 0, 0) == 0
