"""A candidate's worker may not make the asynchronous I/O calls whose requests outlive every listing of its processes,
nor network sockets whose timers do (runners/syscalls.py): its process and everything it starts get ENOSYS and EACCES
for them; the oracle's does not."""
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
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)

def call(nr, *args):
    r = libc.syscall(nr, *args)
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno())

ctx = ctypes.c_ulong(0)
params = ctypes.create_string_buffer(120)
seen = [call(206, 16, ctypes.byref(ctx)), call(425, 4, params), call(206 | 0x40000000, 16, ctypes.byref(ctx)),
        call(41, 2, 1, 0), call(41, 10, 2, 0), call(41, 1, 1, 0)]  # socket: AF_INET, AF_INET6, AF_UNIX
pid = os.fork()
if pid == 0:
    os._exit(0 if call(206, 16, ctypes.byref(ctx)) == "ENOSYS" else 1)
_, status = os.waitpid(pid, 0)
print(" ".join(seen), "child-denied" if os.waitstatus_to_exitcode(status) == 0 else "child-allowed",
      os.getpid() == libc.syscall(39))
"""


def test_the_filter_answers_the_async_io_calls_with_enosys_in_the_process_and_its_children():
    got = subprocess.run([sys.executable, "-c", _CALLS], preexec_fn=syscalls.install, capture_output=True, text=True,
                         check=True).stdout.split()
    # no aio, no io_uring, no x32 call, no network socket; a unix socket and an ordinary call still work
    assert got == ["ENOSYS", "ENOSYS", "ENOSYS", "EACCES", "EACCES", "ok", "child-denied", "True"], got
    free = subprocess.run([sys.executable, "-c", _CALLS], capture_output=True, text=True, check=True).stdout.split()
    assert free[0] == "ok" and free[1] in ("ok", "EPERM") and free[3:6] == ["ok", "ok", "ok"], free  # without it


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
