"""System calls a candidate's worker may not make: the ones whose requests, watches and connections keep work armed in
the kernel while the candidate is stopped, where no listing of its processes shows them. A kernel's worker needs none.

- The asynchronous I/O interfaces (aio's ``io_setup`` and ``io_submit``, ``io_uring_setup``): a timerfd an aio poll
  waits on is held by the request once its descriptor is closed, and an aio context whose ring is unmapped or covered
  by another mapping leaves no trace in ``/proc/PID/maps`` (tests/test_judge_attacks_round26.py: a forged 2.5x
  credited 2.5x).
- epoll (``epoll_create``, ``epoll_create1``): an epoll item is a waiter on the file it watches, and one expiry of a
  timerfd (or one signal into a signalfd) runs every item's callback inside one interrupt. Thousands of items on a
  few allowed timers stalled the core beside a stopped holder for milliseconds an expiry at under one interrupt a
  ms, and a forged 2.0x was credited 2.00-2.11x (round 28). A waiter in ``poll`` or ``select`` leaves the wait
  queue when its thread is stopped; an epoll item stays. (runners/wire.py uses ``select``, subprocess ``poll``.)
- Sockets of any family but unix and netlink: thousands of loopback TCP connections paced by the kernel
  (``SO_MAX_PACING_RATE``) send from their own timers, on the core that armed them, with the loopback path in
  softirq there (round 27: work beside them 1.6-2.1x slower at 5-8 interrupts a ms).
- New namespaces (``unshare``, ``setns``, a ``clone`` with a ``CLONE_NEW*`` flag; ``clone3``, whose flags a filter
  cannot read, gets ENOSYS and glibc falls back to ``clone``): in a user and network namespace of its own a worker
  holds CAP_NET_ADMIN there, and a shaped queue on its loopback sends from its own watchdog timer (round 28's B).
- A ``clone`` with ``CLONE_PARENT`` (EPERM): its child's parent is the judge, which never waits for it, so each that
  exits stays a zombie of the candidate's user for the evaluator's life, past every kill; the next candidate of that
  uid was then refused for the processes it "has" (round 32: 80 zombies, "it has 81 processes"). glibc's fork,
  threads and posix_spawn never set it.
- ``ptrace`` (EPERM): a process in a ptrace stop is not woken by SIGCONT, so a traced holder's POSIX timers could send
  it SIGCONT and SIGSTOP in turn, each finding the other pending and walking its whole queue of pending signals inside
  the timer's interrupt, with every listing clean (round 31: 16 timers over 90000 queued signals cost the core beside
  it 24-32 ms of 200, a forged 2.0x credited 2.01-2.05x in two runs of eight). No kernel's worker traces anything;
  the queue itself is bounded by ``RLIMIT_SIGPENDING`` (runners/processes.py).

A seccomp filter, installed in the candidate's process before it runs any code (``install``, from the judge's
``preexec_fn``) and inherited by every process it starts, answers the interfaces with ENOSYS, which a library meets as
a kernel without them, namespaces with EPERM and sockets with EACCES. runners/armed.py still counts what can be
counted (timers, processes), for a kernel without seccomp.

The filter is built here, in the judge, and only installed in the child between fork and exec (no allocation there).
It is installed with ``SECCOMP_FILTER_FLAG_SPEC_ALLOW``: where the kernel's speculative store bypass mitigation is
"prctl and seccomp", a filter installed without it turns that mitigation on for the candidate's process alone, and
its host code would run slower than the oracle's. (The H200's mode is "prctl": there the filter costs nothing, as its
no-filter variant showed in bench/results/evaluator-h200/session21/.) The filter keeps the candidate off kernel
interfaces, not off the speculation of its own process.
"""
from __future__ import annotations

import ctypes
import os
import struct

_ARCH = {  # the audit arch; the calls' numbers: answered ENOSYS, answered EPERM; clone; socket
    "x86_64": (0xC000003E, {"io_setup": 206, "io_submit": 209, "io_uring_setup": 425, "epoll_create": 213,
                            "epoll_create1": 291, "clone3": 435}, {"unshare": 272, "setns": 308, "ptrace": 101}, 56, 41),
    "aarch64": (0xC00000B7, {"io_setup": 0, "io_submit": 2, "io_uring_setup": 425, "epoll_create1": 20,
                             "clone3": 435}, {"unshare": 97, "setns": 268, "ptrace": 117}, 220, 198),
}.get(os.uname().machine)
_LOCAL_FAMILIES = (1, 16)  # AF_UNIX, AF_NETLINK: the only socket families the worker may make
_NEW_NAMESPACES = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_CLONE_PARENT = 0x8000  # a child of the caller's parent: for a candidate's worker, of the judge (round 32)
_X32_BIT = 0x40000000
_NR_SECCOMP = {"x86_64": 317, "aarch64": 277}.get(os.uname().machine)
_PR_SET_NO_NEW_PRIVS, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_SPEC_ALLOW = 38, 1, 4
_RET_ALLOW = 0x7FFF0000
_ERRNO = {"ENOSYS": 0x00050000 | 38, "EPERM": 0x00050000 | 1, "EACCES": 0x00050000 | 13}  # SECCOMP_RET_ERRNO | errno
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH_AT, _ARG0 = 0, 4, 16  # offsets in seccomp_data: the call's number, its arch, its first argument's low word


def _assemble(code: list) -> list:
    """Instructions whose jumps name labels (a ``str`` entry of ``code`` marks one) into BPF's relative offsets."""
    at, pos = {}, 0
    for item in code:
        if isinstance(item, str):
            at[item] = pos
        else:
            pos += 1
    out = []
    for item in code:
        if isinstance(item, str):
            continue
        op, jt, jf, k = item
        here = len(out)
        jt, jf = (at[j] - here - 1 if isinstance(j, str) else j for j in (jt, jf))
        assert 0 <= jt < 256 and 0 <= jf < 256, (item, jt, jf)  # forward, within a byte
        out.append((op, jt, jf, k))
    return out


def _program() -> bytes:
    """The filter: another architecture's calls (a 64-bit worker makes none), the x32 ones and the listed ones get
    ENOSYS (``clone3``: its flags lie in memory, where a filter cannot read them, and glibc falls back to ``clone``);
    ``unshare``, ``setns`` and a ``clone`` into a new namespace get EPERM; a socket of a family other than unix and
    netlink, EACCES."""
    arch, enosys, eperm, clone_nr, socket_nr = _ARCH
    code = [(_LD_W_ABS, 0, 0, _ARCH_AT), (_JEQ_K, 0, "enosys", arch), (_LD_W_ABS, 0, 0, _NR)]
    if os.uname().machine == "x86_64":
        code.append((_JGE_K, "enosys", 0, _X32_BIT))
    code += [(_JEQ_K, "enosys", 0, nr) for nr in enosys.values()]
    code += [(_JEQ_K, "eperm", 0, nr) for nr in eperm.values()]
    code += [(_JEQ_K, "clone", 0, clone_nr), (_JEQ_K, "socket", 0, socket_nr), (_RET_K, 0, 0, _RET_ALLOW),
             "clone", (_LD_W_ABS, 0, 0, _ARG0), (_JSET_K, "eperm", "allow", _NEW_NAMESPACES | _CLONE_PARENT),
             "socket", (_LD_W_ABS, 0, 0, _ARG0)]
    code += [(_JEQ_K, "allow", 0, family) for family in _LOCAL_FAMILIES]
    code += [(_RET_K, 0, 0, _ERRNO["EACCES"]), "allow", (_RET_K, 0, 0, _RET_ALLOW),  # BPF jumps forward only
             "enosys", (_RET_K, 0, 0, _ERRNO["ENOSYS"]), "eperm", (_RET_K, 0, 0, _ERRNO["EPERM"])]
    return b"".join(struct.pack("HBBI", *ins) for ins in _assemble(code))


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
