"""Whether a paused worker has stopped, and stayed so. SIGSTOP stops a thread only on its way back to user mode: a thread
inside a long system call (a write of hundreds of MB into a memfd holds the file's lock throughout) runs on, and so do
the threads queued on that lock, one write after another. The judge starts the oracle's measurement only once every
thread of the candidate's process group (and, behind the uid wall, of the candidate's user) shows as stopped in /proc:
a worker that kept such chains running slowed one oracle round fourfold and was credited 2.5x for a copy of the
baseline (tests/test_judge_attacks_round21.py). A check before the round is a sample, not a hold: a process whose own
POSIX timer sends it SIGCONT woke 3 ms after it and ran through the oracle's round, and helpers that fork and exit
every millisecond were never where a scan looked (tests/test_judge_attacks_round22.py); so the judge also compares
the threads' CPU time, and which threads there are, before and after the oracle's round (``cpu_times``,
``ran_since``)."""
from __future__ import annotations

import os
import time

_DONE = (b"T", b"t", b"Z", b"X")  # stopped, traced, zombie, dead


def _fields(path: str) -> list[bytes] | None:
    """The fields of a /proc stat file after the command name (which may hold spaces and parentheses)."""
    try:
        with open(path, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()


def _tasks(pgid: int, uid: int | None):
    """(pid, tid, the task's stat fields) of every thread of process group ``pgid``'s processes (and of ``uid``'s,
    when given), whatever state the process's first thread is in: a process whose first thread left by the thread's
    own exit shows that thread's Z while its other threads run on (round 22)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _fields(f"/proc/{name}/stat")
        if fields is None or len(fields) < 3:
            continue
        mine = int(fields[2]) == pgid
        if not mine and uid is not None:
            try:
                mine = os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                continue
        if not mine:
            continue
        try:
            tids = os.listdir(f"/proc/{name}/task")
        except OSError:
            continue
        for tid in tids:
            state = _fields(f"/proc/{name}/task/{tid}/stat")
            if state:
                yield name, tid, state


def running_threads(pgid: int, uid: int | None = None) -> list[str]:
    """The threads of process group ``pgid``'s processes (and of ``uid``'s, when given) that are not stopped, as
    'pid/tid state'."""
    return [f"{pid}/{tid} {state[0].decode(errors='replace')}" for pid, tid, state in _tasks(pgid, uid)
            if state[0] not in _DONE]


_TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")


def _cpu(pid: str, tid: str, state: list[bytes]) -> tuple[float, int]:
    """A thread's CPU time so far and how many times it has been put on a CPU: the scheduler's nanoseconds and count
    where the kernel keeps them, else user and system time in clock ticks (and no count)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
            ns, _, runs = f.read().split()[:3]
        return float(ns), int(runs)
    except (OSError, ValueError):
        return ((int(state[11]) + int(state[12])) * _TICK_NS if len(state) > 12 else 0.0), -1


def cpu_times(pgid: int, uid: int | None = None) -> dict[tuple[str, str, bytes], tuple[bytes, float, int]]:
    """Every thread of the group (and user): its state, CPU time and count of times on a CPU (``_cpu``), keyed by pid,
    tid and start time (a pid used again is another key)."""
    return {(pid, tid, state[19] if len(state) > 19 else b""): (state[0], *_cpu(pid, tid, state))
            for pid, tid, state in _tasks(pgid, uid)}


RAN_SLACK_NS = 1e6  # without the scheduler's count: a thread seen as stopped a moment before it left the CPU


def ran_since(before: dict, after: dict) -> list[str]:
    """What ran between two ``cpu_times`` of a group that was stopped throughout (empty: nothing). A stopped thread is
    never put on a CPU again, forks nothing and does not exit: a thread that was (a process whose own timer sends it
    SIGCONT wakes after the judge's check, round 22, even to fork a helper that exits before the round ends), one that
    was not there before (a helper hopping from process to process), and one that ended meanwhile all ran."""
    out, grown, woke, ended = [], 0.0, [], []
    for key, (state, ns, runs) in before.items():
        if state in (b"Z", b"X"):
            continue
        now = after.get(key)
        if now is None or now[0] in (b"Z", b"X"):
            ended.append(key)
            continue
        grown += max(0.0, now[1] - ns)
        if runs >= 0 and now[2] > runs:
            woke.append(key)
    born = [key for key in after if key not in before]
    if woke:
        out.append(f"{len(woke)} thread(s) put on a CPU again, e.g. {woke[0][0]}/{woke[0][1]}")
    if grown > RAN_SLACK_NS:
        out.append(f"{grown / 1e6:.1f} ms of CPU time")
    if born:
        out.append(f"{len(born)} new thread(s), e.g. {born[0][0]}/{born[0][1]}")
    if ended:
        out.append(f"{len(ended)} thread(s) ended, e.g. {ended[0][0]}/{ended[0][1]}")
    return out


def wait_stopped(pgid: int, uid: int | None, within_s: float) -> list[str]:
    """After a SIGSTOP: wait up to ``within_s`` for every thread to stop; returns those still running (empty: all
    stopped)."""
    deadline = time.monotonic() + within_s
    while True:
        left = running_threads(pgid, uid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.001)
