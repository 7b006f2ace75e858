"""runners/armed.py: timers a stopped candidate holds fire through the oracle's round (round 23); the judge counts
them before the round and refuses a candidate holding more than a handful, or an io_uring."""
import platform
import subprocess
import sys

import pytest

from runners.armed import MAX_PROCESSES, MAX_QUEUED_SIGNALS, MAX_TIMERS, could_slow, held_timers, too_many
from runners.stopped import cpu_times

# a process holding N one-shot POSIX timers armed a minute ahead (SIGURG: ignored), and, when asked, an io_uring
_HOLDER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)


class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class Itimerspec(ctypes.Structure):
    _fields_ = [("interval", Timespec), ("value", Timespec)]


class Sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_int * 12)]


for _ in range(int(sys.argv[1])):
    timer = ctypes.c_void_p()
    assert libc.timer_create(1, ctypes.byref(Sigevent(None, 23, 0)), ctypes.byref(timer)) == 0
    assert libc.timer_settime(timer, 0, ctypes.byref(Itimerspec(Timespec(0, 0), Timespec(60, 0))), None) == 0
if sys.argv[2] == "ring":
    params = ctypes.create_string_buffer(120)
    ring = libc.syscall(425, 4, params)  # io_uring_setup (x86_64)
    assert ring >= 0, ctypes.get_errno()
print("ready", flush=True)
time.sleep(60)
"""


def _held(timers: int, ring: bool = False) -> tuple[dict, str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(timers), "ring" if ring else "-"],
                            stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        return held_timers({str(proc.pid)}), could_slow(cpu_times(proc.pid))
    finally:
        proc.kill()
        proc.wait()


def test_a_worker_holding_no_timers_could_slow_nothing():
    held, why = _held(0)
    queued = held.pop("queued signals")  # its user's, every process of it (the judge's too, in same-user mode)
    assert held == {"POSIX timers": 0, "armed timerfds": 0, "io_uring instances": 0, "aio contexts": 0} and why == ""
    assert 0 <= queued <= MAX_QUEUED_SIGNALS


def test_a_worker_holding_many_timers_is_named():
    held, why = _held(MAX_TIMERS + 8)
    assert held["POSIX timers"] == MAX_TIMERS + 8 and "POSIX timer" in why, (held, why)
    held, why = _held(MAX_TIMERS)
    assert why == "", (held, why)  # a handful fires a handful of interrupts


@pytest.mark.skipif(platform.machine() != "x86_64", reason="io_uring_setup's number in the holder is x86_64's")
def test_an_io_uring_is_named():
    held, why = _held(0, ring=True)
    assert held["io_uring instances"] == 1 and "io_uring" in why, (held, why)


def test_too_many_processes_are_named():
    none = {"POSIX timers": 0, "armed timerfds": 0, "io_uring instances": 0}
    assert too_many(none, MAX_PROCESSES) == "" and "processes" in too_many(none, MAX_PROCESSES + 1)


def test_without_kcmp_a_threads_own_table_is_still_counted(monkeypatch):
    """Where ``kcmp`` cannot compare two threads' tables of open files, threads whose listings differ are taken for
    tables of their own: the 50 armed timerfds of a thread that unshared its table are still counted."""
    from test_judge_attacks_round24 import _held

    from runners import armed

    monkeypatch.setattr(armed, "_KCMP", None)
    seen = _held("thread")
    assert seen["timerfds"] == 50 and "50 armed timerfd(s)" in seen["could_slow"], seen
