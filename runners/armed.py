"""What a stopped candidate holds that the kernel runs on its behalf. Its threads stopped and held (runners/stopped.py),
a candidate's timers still fire: each expiry is an interrupt, its callback and a signal's generation, charged to
whatever runs on that core, the oracle. Tens of thousands of one-shot POSIX timers armed before the judge stopped the
worker, set to expire through the oracle's round, made a busy loop beside it 2.8x slower, no candidate thread having run
(tests/test_judge_attacks_round23.py). A stopped process re-arms nothing (a periodic POSIX timer or timerfd fires once
and waits for its owner to take the signal or read), so what can fire is what it holds when it stops: the judge counts
its POSIX timers (``/proc/PID/timers``), its armed timerfds, its io_uring instances (whose timeouts it cannot see) and
its aio contexts (whose requests hold files no table lists) before the oracle's round, and refuses a candidate with
more than a handful (``MAX_TIMERS``) or any io_uring or aio; and, as
every process may hold an interval timer (``setitimer``, not listed) that fires once, one with more than
``MAX_PROCESSES`` processes. And one with more than ``MAX_THREADS`` threads: a signal to a whole process (a POSIX
timer's, the interval timer's SIGALRM) that none of its threads can take, as none of a stopped process's can, walks
every thread in the timer's interrupt, about 50 ns a thread: 20000 threads made each expiry a stall of about 1 ms, and
16 timers and the interval timer cost the core beside the stopped holder 24-38 ms of 300, every other count clean
(tests/test_judge_attacks_round29.py). The judge's own scans of the candidate's threads grow with them too. And, for a
kernel without the candidate's filter and limits (runners/syscalls.py, runners/processes.py), a thread in a ptrace stop
(SIGCONT does not wake it, so its timers may send it SIGCONT and SIGSTOP in turn) or a queue of pending signals longer
than ``MAX_QUEUED_SIGNALS``: each such signal walks the whole queue in the timer's interrupt (round 31)."""
from __future__ import annotations

import ctypes
import os

MAX_TIMERS = 16  # an honest kernel's worker holds none; a few expiries in a round cost the oracle nothing measurable
MAX_PROCESSES = 64  # a worker, its compiler's children, a pool of torch.compile's workers
# an honest worker: its interpreter, the CUDA driver's few, an intra-op pool of one a core, a compiler's pool; a walk
# of this many threads costs an expiry a few microseconds
MAX_THREADS = max(128, 2 * (os.cpu_count() or 1) + 64)
# signals queued to the candidate's user (``SigQ``; a candidate starts with RLIMIT_SIGPENDING at 256, and each POSIX
# timer counts one): a walk of this many costs an expiry a few microseconds
MAX_QUEUED_SIGNALS = 1024
_KCMP = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)  # the kcmp system call's number
_KCMP_FILES = 2
try:
    _libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols: the C library's syscall
except OSError:
    _libc = None


def _posix_timers(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/timers", "rb") as f:
            return sum(1 for line in f if line.startswith(b"ID:"))
    except OSError:
        return 0


def _same_table(a: str, b: str) -> bool | None:
    """Whether threads ``a`` and ``b`` share one table of open files (``kcmp`` KCMP_FILES); None where it cannot say."""
    if _KCMP is None or _libc is None:
        return None
    r = _libc.syscall(_KCMP, int(a), int(b), _KCMP_FILES, 0, 0)
    return None if r < 0 else r == 0


def _tables(pid: str) -> list[str]:
    """One thread of ``pid`` for each table of open files its threads hold. A thread may hold a table of its own
    (``unshare(CLONE_FILES)``, or made by ``clone`` without CLONE_FILES), listed only under /proc/PID/task/TID/fd; and a
    process whose first thread has exited lists nothing under /proc/PID/fd (round 24): every thread is looked at."""
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return []
    tables: list[str] = []
    listings: set[tuple] = set()
    for tid in tids:
        same = [_same_table(tid, t) for t in tables]
        if any(same):
            continue
        if None in same:  # no kcmp here: threads whose listings are alike are taken for one table
            listing = _listing(pid, tid)
            if listing in listings:
                continue
            listings.add(listing)
        tables.append(tid)
    return tables


def _listing(pid: str, tid: str) -> tuple:
    try:
        return tuple(sorted(os.listdir(f"/proc/{pid}/task/{tid}/fd")))
    except OSError:
        return ()


def _descriptors(pid: str, tid: str) -> tuple[int, int]:
    """Armed timerfds and io_uring instances among the open files of thread ``tid``'s table."""
    timerfds = rings = 0
    base = f"/proc/{pid}/task/{tid}"
    try:
        fds = os.listdir(f"{base}/fd")
    except OSError:
        return 0, 0
    for fd in fds:
        try:
            target = os.readlink(f"{base}/fd/{fd}")
        except OSError:
            continue
        if target == "anon_inode:[io_uring]":
            rings += 1
        elif target == "anon_inode:[timerfd]":
            try:
                with open(f"{base}/fdinfo/{fd}", "rb") as f:
                    info = f.read()
            except OSError:
                continue
            if b"it_value: (0, 0)" not in info:
                timerfds += 1
    return timerfds, rings


def _aio_contexts(pid: str) -> int:
    """A process's aio contexts (each a ``[aio]`` mapping): a timerfd that an aio poll request waits on is held by the
    request once its descriptor is closed, in no table of open files, and fires all the same (round 25: 60000 of them
    credited a forged 2.5x at 2.4-3.2x, their expiries batched into under one interrupt a ms)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return sum(1 for line in f if line.rstrip().endswith((b"/[aio] (deleted)", b"[aio]")))
    except OSError:
        return 0


def _queued_signals(pid: str) -> int:
    """The signals queued to ``pid``'s user (``SigQ`` of /proc/PID/status: that user's count, over all its processes)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigQ:"):
                    return int(line.split()[1].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def held_timers(pids: set[str]) -> dict[str, int]:
    """POSIX timers, armed timerfds and io_uring instances held by the processes ``pids`` (every table of open files
    of their threads, each once), and the signals queued to their user."""
    posix = timerfds = rings = aio = queued = 0
    for pid in pids:
        queued = max(queued, _queued_signals(pid))
        posix += _posix_timers(pid)
        aio += _aio_contexts(pid)
        for tid in _tables(pid):
            t, r = _descriptors(pid, tid)
            timerfds, rings = timerfds + t, rings + r
    return {"POSIX timers": posix, "armed timerfds": timerfds, "io_uring instances": rings, "aio contexts": aio,
            "queued signals": queued}


def too_many(held: dict[str, int], processes: int, threads: int = 0, traced: int = 0) -> str:
    """Why what ``processes`` processes of ``threads`` threads (``traced`` of them in a ptrace stop) hold could slow the
    oracle ('' when it cannot)."""
    timers = held["POSIX timers"] + held["armed timerfds"]
    if processes > MAX_PROCESSES:
        return f"it has {processes} processes, each of which may hold a timer (at most {MAX_PROCESSES})"
    if threads > MAX_THREADS:
        return (f"it has {threads} threads, which every signal to their stopped process walks in the timer's "
                f"interrupt (at most {MAX_THREADS})")
    if held.get("aio contexts"):
        return (f"it holds {held['aio contexts']} aio context(s), whose requests keep files (timers) armed while it is "
                f"stopped")
    if held["io_uring instances"]:
        return f"it holds {held['io_uring instances']} io_uring instance(s), whose timeouts fire while it is stopped"
    if timers > MAX_TIMERS:
        return (f"it holds {held['POSIX timers']} POSIX timer(s) and {held['armed timerfds']} armed timerfd(s), "
                f"which fire while it is stopped (at most {MAX_TIMERS})")
    if traced:
        return (f"{traced} of its threads are in a ptrace stop, which SIGCONT does not end: its timers could send it "
                f"stop and continue signals in turn, each walking its queue of pending signals")
    if held.get("queued signals", 0) > MAX_QUEUED_SIGNALS:
        return (f"{held['queued signals']} signals are queued to its user, which every stop or continue signal walks "
                f"in the timer's interrupt (at most {MAX_QUEUED_SIGNALS})")
    return ""


def could_slow(times: dict) -> str:
    """``too_many`` for the processes of a ``runners.stopped.cpu_times`` snapshot."""
    pids = {pid for pid, _, _ in times}
    traced = sum(1 for state, *_ in times.values() if state == b"t")
    return too_many(held_timers(pids), len(pids), len(times), traced)
