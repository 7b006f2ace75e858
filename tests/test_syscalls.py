"""A candidate's worker may not make the calls whose requests, watches and connections keep work armed in the kernel
past every listing of its processes (runners/syscalls.py: aio, io_uring, epoll, namespaces, sockets but unix and
netlink): its process and everything it starts get ENOSYS, EPERM and EACCES for them; the oracle's does not."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runners import syscalls
from runners.backends import get_backend
from runners.processes import WorkerProcess

pytestmark = pytest.mark.skipif(os.uname().machine != "x86_64", reason="the calls' numbers below are x86_64's")

_CALLS = r"""
import ctypes, errno, json, os, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
filtered = sys.argv[1] == "filtered"

def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, ctypes._SimpleCData) or not isinstance(a, int)
                                          else ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno())

ctx = ctypes.c_ulong(0)
params = ctypes.create_string_buffer(120)
seen = {"io_setup": call(206, 16, ctypes.byref(ctx)), "io_uring_setup": call(425, 4, params),
        "x32 io_setup": call(206 | 0x40000000, 16, ctypes.byref(ctx)),
        "epoll_create1": call(291, 0), "epoll_create": call(213, 8),
        "clone3": call(435, 0, 0),  # no arguments: EFAULT/EINVAL where it is allowed, ENOSYS where it is not
        "setns": call(308, -1, 0),  # a bad descriptor: EBADF where it is allowed
        "ptrace": call(101, 7, os.getpid(), 0, 0)}  # PTRACE_CONT of itself, not traced: ESRCH where it is allowed
for name, family, kind in [("inet", 2, 1), ("inet6", 10, 2), ("packet", 17, 3), ("vsock", 40, 1),
                           ("unix", 1, 1), ("netlink", 16, 3)]:
    seen["socket " + name] = call(41, family, kind, 0)
if filtered:  # where they would be allowed they make a namespace (as root): asked under the filter only
    seen["unshare user+net"] = call(272, 0x10000000 | 0x40000000)
    seen["clone net"] = call(56, 0x40000000 | 17, 0, 0, 0, 0)  # CLONE_NEWNET | SIGCHLD
thread = threading.Thread(target=lambda: None)
thread.start()
thread.join()
seen["thread"] = "ok"  # pthread_create tries clone3, then clone
seen["subprocess"] = "ok" if subprocess.run(["/bin/true"]).returncode == 0 else "failed"
pid = os.fork()
if pid == 0:
    os._exit(0 if call(206, 16, ctypes.byref(ctx)) == "ENOSYS" else 1)
_, status = os.waitpid(pid, 0)
seen["child"] = "denied" if os.waitstatus_to_exitcode(status) == 0 else "allowed"
print(json.dumps(seen))
"""


def test_the_filter_answers_the_calls_that_keep_work_armed_in_the_process_and_its_children():
    import json

    got = json.loads(subprocess.run([sys.executable, "-c", _CALLS, "filtered"], preexec_fn=syscalls.install,
                                    capture_output=True, text=True, check=True).stdout)
    # no aio, io_uring, x32 call or epoll; no namespace; no ptrace; sockets of the unix and netlink families only; threads,
    # subprocesses and forks still work (glibc falls back from clone3 to clone), and a child is filtered too
    assert got == {"io_setup": "ENOSYS", "io_uring_setup": "ENOSYS", "x32 io_setup": "ENOSYS",
                   "epoll_create1": "ENOSYS", "epoll_create": "ENOSYS", "clone3": "ENOSYS", "setns": "EPERM",
                   "ptrace": "EPERM",
                   "socket inet": "EACCES", "socket inet6": "EACCES", "socket packet": "EACCES",
                   "socket vsock": "EACCES", "socket unix": "ok", "socket netlink": "ok",
                   "unshare user+net": "EPERM", "clone net": "EPERM", "thread": "ok", "subprocess": "ok",
                   "child": "denied"}, got
    free = json.loads(subprocess.run([sys.executable, "-c", _CALLS, "free"], capture_output=True, text=True,
                                     check=True).stdout)
    assert free["io_setup"] == "ok" and free["epoll_create1"] == "ok" and free["socket inet"] == "ok", free
    assert free["clone3"] != "ENOSYS" and free["setns"] == "EBADF" and free["child"] == "allowed", free  # without it
    assert free["ptrace"] == "ESRCH", free


def _status(pid: int) -> dict:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def test_a_candidate_worker_runs_under_the_filter_and_the_oracle_does_not(tmp_path):
    workers = {role: WorkerProcess(get_backend("interpret"), tmp_path, role, None, None)
               for role in ("candidate", "oracle")}
    try:
        for w in workers.values():
            w.wait_ready(120)
        assert _status(workers["candidate"].proc.pid)["Seccomp"].strip() == "2"  # a filter
        assert _status(workers["oracle"].proc.pid)["Seccomp"].strip() == "0"
        # the filter forces no speculation mitigation on the candidate alone (SECCOMP_FILTER_FLAG_SPEC_ALLOW): where
        # the kernel's mode is "prctl and seccomp" it would otherwise, and its host code runs slower than the oracle's
        for line in ("Speculation_Store_Bypass", "SpeculationIndirectBranch"):
            sides = [_status(w.proc.pid).get(line) for w in workers.values()]
            assert sides[0] == sides[1], (line, sides)
    finally:
        for w in workers.values():
            w.kill()
