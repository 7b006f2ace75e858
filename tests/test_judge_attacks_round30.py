"""Attacks on the judge, thirtieth round: what a stopped candidate can still make the kernel do on the oracle's cores
under round 28's filter (runners/syscalls.py: no aio, io_uring or epoll, unix and netlink sockets only, no new
namespaces) and round 29's thread cap (runners/armed.py ``MAX_THREADS``, ``RLIMIT_NPROC`` behind the uid wall).

A. **Timerfds in flight: one interrupt whose length only RLIMIT_NOFILE bounds, and the judge did not set it** (CLOSED:
   the candidate's worker now starts with 1024 open files, ``processes.CANDIDATE_OPEN_FILES``; severity was set by the
   host's open-files limit; not credited end to end here). A timerfd sent over a unix socket
   (SCM_RIGHTS) and closed by its sender is in no table of open files (round 23's A'), so ``could_slow`` counts
   nothing; armed to one absolute time, all its expiries are run by *one* hrtimer interrupt on the core that armed
   them (``__hrtimer_run_queues`` takes every timer due at entry), so ``interrupts.storm`` sees nothing either. A
   timerfd with no waiter costs little (round 26 left it there: "a candidate's RLIMIT_NOFILE bounds them"), but the
   bound is the candidate's: the kernel refuses a file in flight only once its *user* has more in flight than the
   sender's ``RLIMIT_NOFILE`` (``too_many_unix_fds``: ETOOMANYREFS), and ``processes._child_setup`` sets
   ``RLIMIT_AS`` and ``RLIMIT_NPROC`` only, so the worker inherits the judge's open-files limit (20000 here; a
   container's default is often 1048576, systemd's ``LimitNOFILE=infinity`` the same). Measured on this VM (6.18,
   2 cores), the holder under the candidate's filter and stopped as the judge stops a candidate, a loop beside it:
   20000 in flight as an unprivileged uid (the most it may: ETOOMANYREFS at 20250) stall that core for 2.7-4.0 ms in
   one interrupt; 60000 (a user allowed more: here the root holder) 9.1-9.2 ms, 100000 13.6 ms in one interrupt,
   or 4.3-5.8 ms in each of 4 bursts over 60 ms (20.8 ms in all): about 140-200 ns a timerfd. Every check clean throughout:
   ``still_running`` and ``ran_since`` empty, ``could_slow`` empty (0 timerfds in any table), 0.30-0.35 interrupts
   a ms. Each timerfd fires once a stop (a stopped process re-arms nothing); a worker re-arms them between the
   oracle's rounds by taking its messages back (round 23's cheat does), so every oracle round can be hit. With a
   host limit of 1048576, ~1M in flight would be ~150-200 ms of one interrupt in each of the oracle's rounds (at
   about 0.5 KB of kernel memory each, 0.5 GB no ``RLIMIT_AS`` counts). At this VM's 20000 it is 3-4 ms a round on a
   38-41 ms pass (round 26: 1.09-1.25x on the stand-in): under the stand-in's end-to-end noise (round 29: the
   tolerance lets a forged 1.5x through on noise alone), so not built through the Evaluator here.
   Fix: bound what a candidate may keep in flight. Set ``RLIMIT_NOFILE`` in ``_child_setup`` for the candidate
   (soft and hard, e.g. 4096: ~0.7 ms of one interrupt at most; a Triton/torch worker holds a few hundred files;
   behind the uid wall the count is per user, so it covers all the candidate's processes); counting ``scm_fds`` in
   the fdinfo of the candidate's unix sockets (6.18 prints it) is not enough alone, as a socket may itself be in
   flight. Tests: ``test_a_timerfds_in_flight_stall_the_core_beside_a_stopped_holder`` (the mechanism at the
   candidate's uid, every check clean), ``test_a_the_stall_grows_with_the_timerfds_in_flight`` (what a larger limit
   buys), ``test_a_a_candidates_worker_has_a_small_open_files_limit`` (the fix: 1024, not 4096, the usual default
   under which CUDA and Triton run), ``test_a_a_candidate_started_as_the_judge_starts_one_keeps_few_in_flight``
   (refused at 1250 in flight, the longest gap beside it 0.2 ms).

Read, not found (no trigger while the candidate is stopped, or refused already): what the judge and the oracle do
inside the oracle's timed request is a write and a read on the oracle's private pipes and the oracle's own compute
(``worker.window``: the fill, the pass, the digest; the outbox is written at ``reveal``, under the held stop but
untimed but for the checkpoints, whose time is capped at half a pass and taken as the least of the rounds). So
fasync/``F_SETOWN``/``O_ASYNC`` (SIGIO sent by the writer of a watched pipe or socket), ``F_NOTIFY``, inotify and
fanotify marks, ``F_SETLEASE`` leases and ``mq_notify`` all need an event on a file or queue the candidate can reach,
and none happens there: behind the uid wall the judge's and the oracle's pipes, folders and ``/proc/PID/fd`` are out
of its reach (and /proc/stat, which the judge reads, is read outside the timed span). Netlink: the broadcasts an
unprivileged socket may join fire on device, route and address changes, none of which the oracle's round makes;
taskstats and the process connector need CAP_NET_ADMIN. Unix garbage collection runs when a unix socket is released
anywhere (``unix_schedule_gc``) or on a send past 16000 in flight, neither by the oracle. Every other kind of wait
a stopped thread is in (futex, poll/select, nanosleep, mq_timed*) is left when the stop's signal wakes it, with its
hrtimer; a thread in D state is ``still_running``; a traced stop ('t') runs nothing. POSIX CPU timers and per-task
perf events count only the stopped task's own run time; CPU-wide perf events need ``perf_event_paranoid`` <= 0
(2 here) or CAP_PERFMON, which a candidate's uid has not. RT signals queued to a stopped process are walked only when
dequeued or when a SIGCONT or stop signal finds one of its kind pending (``flush_sigqueue_mask`` returns at once
otherwise). Keys' expiry (``key_gc_timer``) walks every key, but an unprivileged user may hold 200. The kernel's
own periodic work over a stopped candidate's memory (the flushers every 5 s for pages dirty 30 s, khugepaged every
10 s, kcompactd's proactive compaction every 0.5 s, KSM off here) is neither aimed by it nor repeated once done.

Runtime: about 15 s (three stopped holders, the largest putting 60000 timerfds in flight).
"""
from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest
from test_judge_attacks_round24 import _stub
from test_judge_attacks_round28 import LINUX_X86

from runners import interrupts as machine_irqs
from runners import syscalls
from runners.armed import could_slow, held_timers
from runners.stopped import ran_since

UID = 62997  # a uid no one uses here, as the uid wall picks one (runners/isolation.py UID_RANGE)
OPEN_FILES_BOUND = 4096  # what a candidate's worker should be held to (the fix): ~0.7 ms of one interrupt at most

# a stand-in for the candidate's worker, on one core: N timerfds armed to expire at one absolute time (or BURSTS
# times over 60 ms), each sent over a unix stream socket (250 a message) and closed, so that no table holds any;
# prints its pid, how many it put in flight, the first expiry (CLOCK_MONOTONIC) and the kernel's refusal if any
_FLIGHT = r"""
import array, ctypes, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
class TS(ctypes.Structure): _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
class ITS(ctypes.Structure): _fields_ = [("interval", TS), ("value", TS)]
n, bursts, delay, core = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
os.sched_setaffinity(0, {core})
soft, hard = __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)
__import__("resource").setrlimit(__import__("resource").RLIMIT_NOFILE, (hard, hard))
first = time.monotonic() + delay
cur, sent, refused, pairs = None, 0, "", []
while sent < n and not refused:
    fds = []
    for j in range(min(250, n - sent)):
        fd = libc.timerfd_create(1, 0)
        assert fd >= 0, ctypes.get_errno()
        at = first + 0.06 * ((sent + j) % bursts) / max(1, bursts - 1)
        assert libc.timerfd_settime(fd, 1, ctypes.byref(ITS(TS(0, 0), TS(int(at), int((at % 1) * 1e9)))), None) == 0
        fds.append(fd)
    while True:
        if cur is None:
            cur = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            cur[0].setblocking(False)
            pairs.append(cur)
        try:
            cur[0].sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            sent += len(fds)
            break
        except BlockingIOError:
            cur = None
        except OSError as e:
            refused = os.strerror(e.errno).replace(" ", "_")
            break
    for fd in fds:
        os.close(fd)
print(os.getpid(), sent, first, refused or "-", flush=True)
time.sleep(120)
"""


def _gaps(seconds: float) -> list[float]:
    """The gaps (over 0.2 ms) in a busy loop's view of the clock: an interrupt that runs long shows as one."""
    t0 = last = time.perf_counter()
    out = []
    while last - t0 < seconds:
        now = time.perf_counter()
        if now - last > 2e-4:
            out.append(now - last)
        last = now
    return out


def _stopped_flight(n: int, bursts: int, uid: int | None, preexec=syscalls.install) -> dict:
    """The stand-in, started under the candidate's filter (as ``uid`` where given), stopped and checked as the judge
    stops a candidate before the oracle's round; then a loop on its core through its expiries."""
    core = sorted(os.sched_getaffinity(0))[0]
    python = shutil.which("python3", path="/usr/bin:/bin") if uid is not None else sys.executable
    kw = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
    proc = subprocess.Popen([python, "-c", _FLIGHT, str(n), str(bursts), str(1.0 + n * 3.5e-5), str(core)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, cwd="/",
                            preexec_fn=preexec, **kw)
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        line = proc.stdout.readline().split()
        assert line, proc.stderr.read().decode(errors="replace")[-2000:]
        made, first, refused = int(line[1]), float(line[2]), line[3].decode()
        worker = _stub(proc.pid)
        worker.pause()
        try:
            left = worker.still_running()
            before = worker.cpu_times()
            pids = {pid for pid, _, _ in before}
            held, slow = held_timers(pids), could_slow(before)
            wait = first - 0.05 - time.monotonic()
            assert wait > 0, "the judge's scans took longer than the stand-in's delay"
            time.sleep(wait)
            irq, t = machine_irqs.total(), time.perf_counter()
            gaps = sorted(_gaps(0.2), reverse=True)
            rate = machine_irqs.per_ms(irq, machine_irqs.total(), (time.perf_counter() - t) * 1e6)
            ran = ran_since(before, worker.cpu_times())
        finally:
            worker.resume()
    finally:
        os.sched_setaffinity(0, mask)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return {"in_flight": made, "refused": refused, "top_gaps_ms": [round(g * 1e3, 2) for g in gaps[:4]],
            "left": left, "ran": ran, "could_slow": slow, "held": held, "irq_ms": rate}


def _clean(seen: dict) -> bool:
    """Every check the judge makes at the held stop, and the interrupt rule, read nothing."""
    return (seen["left"] == [] and seen["ran"] == [] and seen["could_slow"] == ""
            and not any(v for k, v in seen["held"].items() if k != "queued signals")  # the user's: ambient
            and (seen["irq_ms"] is None or seen["irq_ms"] < machine_irqs.FLOOR_PER_MS))


def _needs_root():
    if os.geteuid() != 0 or not shutil.which("python3", path="/usr/bin:/bin"):
        pytest.skip("needs root (to start the holder as another uid) and a system python3 every user may run")


@LINUX_X86
def test_a_timerfds_in_flight_stall_the_core_beside_a_stopped_holder():
    """A at the candidate's uid: as many timerfds in flight as its user may have (its RLIMIT_NOFILE, inherited from
    the judge: 20000 here, ETOOMANYREFS past it), all due at once, stall the core beside the stopped holder in one
    interrupt (2.7-4.0 ms here), with every check the judge makes clean. Passes today: the judge lets it through."""
    _needs_root()
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    want = min(limit + 2000, 40_000)
    seen = _stopped_flight(want, 1, UID)
    assert _clean(seen), seen
    # the only bound is the user's open-files limit, which the candidate's worker inherits from the judge
    assert seen["in_flight"] >= min(limit, want) - 500, seen
    per_file_ns = 1e6 * seen["top_gaps_ms"][0] / seen["in_flight"] if seen["top_gaps_ms"] else 0.0
    assert per_file_ns > 50, seen  # about 140-200 ns a timerfd, all of it in one interrupt


@LINUX_X86
def test_a_the_stall_grows_with_the_timerfds_in_flight():
    """What a larger open-files limit buys (a user allowed more: the root holder here): 60000 in flight stall the
    core for 9.1-9.2 ms in one interrupt (100000: 13.6 ms), the checks clean."""
    if os.geteuid() != 0:
        pytest.skip("the root holder stands in for a user with a larger limit")
    seen = _stopped_flight(60_000, 1, None)
    assert seen["in_flight"] == 60_000 and _clean(seen), seen
    assert seen["top_gaps_ms"] and seen["top_gaps_ms"][0] > 4.0, seen


@LINUX_X86
def test_a_a_candidates_worker_has_a_small_open_files_limit():
    """The fix: a worker started as the judge starts a candidate behind the uid wall (``_child_setup``) may not
    raise its open-files limit past ``OPEN_FILES_BOUND`` (``processes.CANDIDATE_OPEN_FILES``, 1024), and so may not
    keep more timerfds than that in flight (before the fix: the judge's 20000)."""
    from runners.processes import _child_setup

    _needs_root()
    code = ("import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
            "try:\n    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\nexcept ValueError:\n    pass\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    proc = subprocess.run([shutil.which("python3", path="/usr/bin:/bin"), "-c", code], capture_output=True, text=True,
                          timeout=60, check=False, cwd="/", preexec_fn=functools.partial(_child_setup, None, True, 64),
                          user=UID, group=UID, extra_groups=[])
    assert proc.returncode == 0, proc.stderr[-800:]
    assert int(proc.stdout) <= OPEN_FILES_BOUND, f"the candidate may hold {proc.stdout.strip()} open files"


@LINUX_X86
def test_a_a_candidate_started_as_the_judge_starts_one_keeps_few_in_flight():
    """The fix end to end at the mechanism: the holder started as the judge starts a candidate behind the uid wall
    (``_child_setup``: the filter, ``RLIMIT_NPROC`` and ``CANDIDATE_OPEN_FILES``) is refused past about its open-files
    limit (ETOOMANYREFS: 1250 of 20000 here, the longest gap beside it 0.2 ms against 2.7-4.0), so the interrupt that
    runs its expiries is short."""
    from runners.processes import CANDIDATE_OPEN_FILES, _child_setup

    _needs_root()
    seen = _stopped_flight(20_000, 1, UID, functools.partial(_child_setup, None, True, 512))
    # the kernel checks the count before it adds a message's files: one message (250 here) may pass the limit
    assert seen["refused"] != "-" and seen["in_flight"] <= CANDIDATE_OPEN_FILES + 253, seen
