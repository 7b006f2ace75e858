"""What a stopped candidate holds that the kernel runs on its behalf. Its threads stopped and held (runners/stopped.py),
a candidate's timers still fire: each expiry is an interrupt, its callback and a signal's generation, charged to
whatever runs on that core, the oracle. Tens of thousands of one-shot POSIX timers armed before the judge stopped the
worker, set to expire through the oracle's round, made a busy loop beside it 2.8x slower, no candidate thread having run
(tests/test_judge_attacks_round23.py). A stopped process re-arms nothing (a periodic POSIX timer or timerfd fires once
and waits for its owner to take the signal or read), so what can fire is what it holds when it stops: the judge counts
its POSIX timers (``/proc/PID/timers``), its armed timerfds and its io_uring instances (whose timeouts it cannot see)
before the oracle's round, and refuses a candidate with more than a handful (``MAX_TIMERS``) or any io_uring; and, as
every process may hold an interval timer (``setitimer``, not listed) that fires once, one with more than
``MAX_PROCESSES`` processes."""
from __future__ import annotations

import os

MAX_TIMERS = 16  # an honest kernel's worker holds none; a few expiries in a round cost the oracle nothing measurable
MAX_PROCESSES = 64  # a worker, its compiler's children, a pool of torch.compile's workers


def _posix_timers(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/timers", "rb") as f:
            return sum(1 for line in f if line.startswith(b"ID:"))
    except OSError:
        return 0


def _descriptors(pid: str) -> tuple[int, int]:
    """Armed timerfds and io_uring instances among a process's open files."""
    timerfds = rings = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0, 0
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target == "anon_inode:[io_uring]":
            rings += 1
        elif target == "anon_inode:[timerfd]":
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as f:
                    info = f.read()
            except OSError:
                continue
            if b"it_value: (0, 0)" not in info:
                timerfds += 1
    return timerfds, rings


def held_timers(pids: set[str]) -> dict[str, int]:
    """POSIX timers, armed timerfds and io_uring instances held by the processes ``pids`` (threads share their
    process's)."""
    posix = timerfds = rings = 0
    for pid in pids:
        posix += _posix_timers(pid)
        t, r = _descriptors(pid)
        timerfds, rings = timerfds + t, rings + r
    return {"POSIX timers": posix, "armed timerfds": timerfds, "io_uring instances": rings}


def too_many(held: dict[str, int], processes: int) -> str:
    """Why what ``processes`` processes hold could slow the oracle ('' when it cannot)."""
    timers = held["POSIX timers"] + held["armed timerfds"]
    if processes > MAX_PROCESSES:
        return f"it has {processes} processes, each of which may hold a timer (at most {MAX_PROCESSES})"
    if held["io_uring instances"]:
        return f"it holds {held['io_uring instances']} io_uring instance(s), whose timeouts fire while it is stopped"
    if timers > MAX_TIMERS:
        return (f"it holds {held['POSIX timers']} POSIX timer(s) and {held['armed timerfds']} armed timerfd(s), "
                f"which fire while it is stopped (at most {MAX_TIMERS})")
    return ""


def could_slow(times: dict) -> str:
    """``too_many`` for the processes of a ``runners.stopped.cpu_times`` snapshot."""
    pids = {pid for pid, _, _ in times}
    return too_many(held_timers(pids), len(pids))
