"""Attacks on the judge, twenty-ninth round: what a stopped candidate still makes the kernel do on the oracle's cores
once round 28's filter (runners/syscalls.py: no epoll, no namespaces, unix and netlink sockets only) has taken the
epoll fan away.

A. **One timer signal walks every thread of the stopped process** (CLOSED; end to end it was not credited above
   the stand-in's noise). A process-directed signal (a POSIX timer's ``SIGEV_SIGNAL``, the interval timer's
   SIGALRM) is handed to a thread that wants it (``complete_signal``); where none does, the kernel walks the whole
   thread list before giving up, and a *stopped* thread never wants one (``wants_signal``: ``task_is_stopped``). So
   once the judge stops a candidate, every expiry of its timers walks all its threads inside the timer's interrupt, on
   the core that armed it. Threads are not processes: ``MAX_PROCESSES`` (64) counts pids, and a worker may start
   tens of thousands of threads (``pthread_create`` of libc's ``pause``, 16-64 KiB stacks; this VM's ``pid_max`` of
   32768 is the bound here, a host with systemd's 4194304 has more room). Measured on this VM (6.18): one
   ``kill(SIGRTMIN)`` to a stopped process costs the sender 0.04 ms at 2000 threads, 0.24 ms at 5000, 0.95-1.2 ms
   at 20000 (about 50 ns a thread once out of cache); 16 POSIX timers (``MAX_TIMERS``) and the interval timer,
   expiring over 60 ms, cost the loop beside a stopped holder of 25000 threads 24 ms (20000: 24-38 ms over the
   test's 300 ms loop), at 0.3
   interrupts a ms, with ``stopped.ran_since`` empty, ``armed.could_slow`` empty (16 POSIX timers, one process), and
   the holder started under the candidate's seccomp filter (none of ``clone`` without namespace flags,
   ``timer_create``, ``setitimer``, ``rt_sigprocmask`` is refused). Weaker than round 28's fan (17 walks a stop, not
   16 x 50000 items), and the judge's own look at every thread (``cpu_times``, ``still_running``: about 18 us a
   thread, 0.36-0.52 s each at 20000) both taxes it and blurs its aim: the cheat
   (``tests/cheats/round29_walks_its_threads_on_each_signal.py``: round 28's timing, the oracle's window predicted
   from round 0's gap less its own estimate of the judge's last scan) hit one of the two counted oracle windows in
   most runs (oracle walls 44-80 ms against the candidate's 40-42) but both rarely: a forged 2.0x was quarantined in
   2 of 2 runs (clock 0.86x, 0.97x); a forged 1.5x was "credited" 1.46-1.50x in 3 of 6 runs, but the same claim
   with no threads was credited 1.50x in 1 of 3 (the stand-in harness's tolerance of 0.5 lets 1.5x through on
   noise), so nothing is shown beyond noise end to end.
   Fix (landed): count threads, not only processes. ``armed.could_slow`` refuses a candidate whose processes hold
   more than ``MAX_THREADS`` threads in all (128, or twice the cores and 64 more: an honest Triton/torch worker holds
   tens, torch's intra-op pool and Triton's compile pool among them; at ~50 ns a thread a walk is a few us), and
   behind the uid wall the worker starts with ``RLIMIT_NPROC`` at four times that, so the tens of thousands cannot be
   made and the judge's own per-thread scans stay short. Tests:
   ``test_a_walked_threads_stall_the_core_beside_a_stopped_holder_and_are_refused`` (the loss measured, the refusal),
   ``test_a_one_signal_walks_every_thread`` (the walk's cost), ``test_a_end_to_end`` (refused for its threads),
   ``test_behind_the_uid_wall_a_candidate_may_not_make_thousands_of_threads``.

B. **The stop itself, during the oracle's samples** (CLOSED by the clock, low). The samples are taken without the
   settled wait (runners/alone.py): a SIGSTOP to a process of 20000 threads makes every thread run to stop itself,
   on both cores, while the oracle's sample is timed; the claim rose from a forged 1.5x to 3.5-3.6x. The judge's
   clock is taken settled and did not follow (quarantined: "claimed speedup 3.583x is above what the judge's clock
   saw, 0.979x"). Nothing to fix beyond A's thread cap, which bounds this too.

Runtime: about 20 s (one end-to-end run and its control).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import CHEATS
from test_judge_attacks_round24 import _credited, _stub
from test_judge_attacks_round28 import LINUX_X86, _loop

from runners import interrupts as machine_irqs
from runners import syscalls
from runners.armed import MAX_PROCESSES, MAX_TIMERS, could_slow, held_timers
from runners.stopped import ran_since

CHEAT = "round29_walks_its_threads_on_each_signal.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 38-41 ms on the stand-in (rounds 21-28)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = float(os.environ.get("KS_ROUND29_CLAIM", "2.0"))
THREADS = int(os.environ.get("KS_ROUND29_THREADS", "25000"))
RUNS = int(os.environ.get("KS_ROUND29_RUNS", "1"))
DELAY = 3.5  # the stand-in's timers armed this long ahead: the judge's stop and scans of 20000 threads took 1.66 s on
# a loaded CI machine (the old 1.6 s left no time to measure there)
# a stand-in for the candidate's worker, on one core: THREADS threads in libc's pause (the signals blocked in each),
# TIMERS POSIX timers (SIGEV_SIGNAL, an RT signal) and its interval timer; on "g" from stdin it arms them DELAY s
# ahead (spread over 60 ms), says "q" and waits to be stopped
_WALK = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
class TS(ctypes.Structure): _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
class ITS(ctypes.Structure): _fields_ = [("interval", TS), ("value", TS)]
class TV(ctypes.Structure): _fields_ = [("sec", ctypes.c_long), ("usec", ctypes.c_long)]
class ITV(ctypes.Structure): _fields_ = [("interval", TV), ("value", TV)]
class SEV(ctypes.Structure):
    _fields_ = [("value", ctypes.c_long), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("pad", ctypes.c_char * 48)]
threads, timers, delay, core = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
os.sched_setaffinity(0, {core})
RT = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, {RT, signal.SIGALRM})
attr = ctypes.create_string_buffer(128)
libc.pthread_attr_init(attr)
libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(16384))
fn, tid, made = ctypes.cast(libc.pause, ctypes.c_void_p), ctypes.c_ulong(), 0
for _ in range(threads):
    if libc.pthread_create(ctypes.byref(tid), attr, fn, None) != 0:
        break
    made += 1
ids = []
for _ in range(timers):
    t = ctypes.c_void_p()
    assert libc.timer_create(1, ctypes.byref(SEV(0, RT, 0)), ctypes.byref(t)) == 0, ctypes.get_errno()
    ids.append(t)
os.write(1, b"%d %d\n" % (os.getpid(), made))
if os.read(0, 1) == b"g":
    first = time.clock_gettime(time.CLOCK_MONOTONIC) + delay
    for k, t in enumerate(ids):
        at = first + 0.06 * k / max(1, len(ids) - 1)
        libc.timer_settime(t, 1, ctypes.byref(ITS(TS(0, 0), TS(int(at), int((at % 1) * 1e9)))), None)
    libc.setitimer(0, ctypes.byref(ITV(TV(0, 0), TV(int(delay), int((delay % 1) * 1e6) + 30000))), None)
    os.write(1, b"q %.6f\n" % first)
time.sleep(120)
"""


def _holder(threads: int, timers: int, delay: float, core: int) -> tuple[subprocess.Popen, int]:
    """The stand-in, started under the candidate's seccomp filter (runners/syscalls.py), as the judge starts one."""
    proc = subprocess.Popen([sys.executable, "-c", _WALK, str(threads), str(timers), str(delay), str(core)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=syscalls.install)
    line = proc.stdout.readline().split()
    assert line, proc.stderr.read().decode(errors="replace")[-2000:]
    return proc, int(line[1])


@LINUX_X86
def test_a_one_signal_walks_every_thread():
    """A's cost, measured where the walk runs in the sender's own system call: one ``kill(SIGRTMIN)`` to a stopped
    process (the signal blocked in every thread) takes far longer at 20000 threads than at none (0.95-1.2 ms against
    a few us on this VM)."""
    costs = {}
    for threads in (0, 20_000):
        proc, made = _holder(threads, 0, 1.0, 0)
        try:
            assert made == threads, made
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(0.3 + threads * 2e-5)
            took = []
            for _ in range(9):
                t = time.perf_counter()
                os.kill(proc.pid, signal.SIGRTMIN)
                took.append(time.perf_counter() - t)
            costs[threads] = sorted(took)[4] * 1e3
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert costs[20_000] > 0.25 and costs[20_000] > 20 * costs[0], costs


@LINUX_X86
def test_a_walked_threads_stall_the_core_beside_a_stopped_holder_and_are_refused():
    """A stopped holder of 20000 threads (under the candidate's filter) with MAX_TIMERS POSIX timers and its interval
    timer: the loop beside it loses 24-38 ms to 17 expiries while every check but one reads it as harmless (still
    running, ``ran_since``, the process and timer counts, ``interrupts.storm``'s floor); ``could_slow`` refuses it for
    its threads (``armed.MAX_THREADS``)."""
    core = sorted(os.sched_getaffinity(0))[0]
    mask = os.sched_getaffinity(0)
    proc, made = _holder(20_000, MAX_TIMERS, DELAY, core)
    os.sched_setaffinity(0, {core})
    try:
        assert made == 20_000, made
        _loop(0.05)
        n, s = _loop(0.1)
        quiet = n / s
        proc.stdin.write(b"g")
        proc.stdin.flush()
        said = proc.stdout.readline().split()
        assert said[:1] == [b"q"], said
        first = float(said[1])  # the first expiry (CLOCK_MONOTONIC)
        worker = _stub(proc.pid)
        worker.pause()
        try:
            left = worker.still_running()
            before = worker.cpu_times()
            pids = {pid for pid, _, _ in before}
            held, slow = held_timers(pids), could_slow(before)
            wait = first - 0.15 - time.clock_gettime(time.CLOCK_MONOTONIC)  # the loop: from before the first expiry
            assert wait > 0, f"the judge's scans took {DELAY - 0.15 - wait:.2f} s, past the stand-in's delay"  # on
            time.sleep(wait)
            irq = machine_irqs.total()
            n, s = _loop(0.3)  # to past the last
            rate = machine_irqs.per_ms(irq, machine_irqs.total(), s * 1e6)
            ran = ran_since(before, worker.cpu_times())
        finally:
            worker.resume()
        n2, s2 = _loop(0.1)
        quiet = max(quiet, n2 / s2)
    finally:
        os.sched_setaffinity(0, mask)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    lost_ms = (s - n / quiet) * 1000
    seen = {"lost_ms": lost_ms, "left": left, "held": held, "could_slow": slow, "ran": ran, "irq_ms": rate,
            "processes": len(pids)}
    # every other check the judge makes reads clean (which is why it let it through before the thread count) ...
    assert left == [] and ran == [] and len(pids) <= MAX_PROCESSES and held["POSIX timers"] == MAX_TIMERS, seen
    assert rate is None or rate < machine_irqs.FLOOR_PER_MS, seen
    # ... and the thread count refuses it. (The core lost 24-38 ms of 300 to 17 expiries when this VM was quiet; on a
    # loaded one the loop's quiet rate is no baseline, and a CI simulation read -9.8 ms: said, not asserted.)
    assert f"{len(before)} threads" in slow, seen


def _source(threads: int, timers: int = 16) -> str:
    text = (CHEATS / CHEAT).read_text()
    for key, value in {"CLAIM": str(CLAIM), "THREADS": str(threads), "TIMERS": str(timers), "LAG": "0.002",
                       "SPAN": "0.9", "SCALE": "1.25"}.items():
        text = text.replace(f"@{key}@", value)
    return text


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> list[dict]:
    """RUNS evaluations of the cheat (THREADS threads, 16 POSIX timers and the interval timer), then the same forged
    claim without threads."""
    from test_judge_attacks_round4 import _timed_judge
    return _timed_judge(rms_bundle, tmp_path_factory.mktemp("round29"),
                        [(_source(THREADS), "verify", 81 + k, NUMBERS) for k in range(RUNS)]
                        + [(_source(0), "verify", 91, NUMBERS)], SYMBOLS, one_thread=True)


def _seen(evs: list[dict]) -> str:
    return "; ".join(f"{ev['stage']} ok={ev['ok']} speedups {ev['speedups']} walls (ms, oracle then candidate) "
                     f"{ev['window_ms']} irq/ms (oracle) {[[q.get('irq') for q in p or []] for p in ev['parts'] or []]} "
                     f"{ev['error'][:300]}" for ev in evs)


def test_a_end_to_end(runs):
    """A through the real Evaluator on the timed stand-in: a copy of the baseline claiming CLAIM (2.0), THREADS threads
    and its 17 timers aimed at the oracle's counted windows, is refused for its threads at the first held stop
    (before the fix: quarantined in 2 of 2 runs at 2.0x, clock 0.86x and 0.97x, one counted window hit and the other
    missed; a forged 1.5x "credited" 1.46-1.50x in 3 of 6 runs, within the stand-in's noise). The control without
    threads earns nothing above the clock's noise."""
    credited = [_credited(ev) for ev in runs[:RUNS]]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}: {_seen(runs)}"
    assert all(not ev["ok"] and "threads" in ev["error"] for ev in runs[:RUNS]), _seen(runs[:RUNS])
    # the control earns no credit worth its claim either: quarantined, or held by the clock to its noise (a CI
    # simulation credited it 1.16x, the clock's view of two equal kernels on the stand-in)
    control = _credited(runs[-1])
    assert control is None or control <= 1.25, _seen(runs[-1:])


@LINUX_X86
def test_behind_the_uid_wall_a_candidate_may_not_make_thousands_of_threads():
    """Behind the uid wall the candidate's worker starts with ``RLIMIT_NPROC`` (runners/processes.py ``_child_setup``):
    its user's processes and threads are capped, so it cannot make the tens of thousands that A needs (and that every
    scan of the judge then walks)."""
    import functools
    import shutil

    from runners.processes import _child_setup

    python = shutil.which("python3", path="/usr/bin:/bin") or ""
    if os.geteuid() != 0 or not python:
        pytest.skip("needs root (to start the probe as another uid) and a system python3 every user may run")
    code = ("import threading, time\nmade = 0\ntry:\n    for _ in range(400):\n"
            "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n        made += 1\n"
            "except RuntimeError:\n    pass\nprint(made)")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd="/",
                          preexec_fn=functools.partial(_child_setup, None, True, 64), user=62997, group=62997,
                          extra_groups=[])
    assert proc.returncode == 0 and 0 < int(proc.stdout) < 64, (proc.stdout, proc.stderr[-800:])
