"""Attacks on the judge, twenty-second round: what the last session changed.

1. **Stopped means stopped** (runners/stopped.py ``running_threads``, ``wait_stopped``; runners/judge_clock.py
   ``_alone(settled=True)``): before each oracle round of its clock the judge SIGSTOPs the candidate and waits until
   every thread of its group (and of its user, behind the uid wall) shows as stopped in /proc.

   A. **A process that wakes itself after the check**
      (``tests/cheats/round22_wakes_itself_after_the_judges_check.py``, CLOSED). The check is one snapshot before the
      round. A process whose POSIX timer has SIGCONT as its signal (``timer_create``) is continued by the kernel when
      the timer expires, stopped or not. The cheat's children (in the worker's group, one pinned per core) keep a 3 ms
      one-shot timer re-armed while they run, so they wake up ~3 ms after the judge stops them; they SIGSTOP
      themselves again for the first 10 ms (the judge's scan finds all stopped), then burn the CPU until their worker
      is resumed, i.e. through the oracle's timed window. Every oracle round is slowed alike, so the shortest pass and
      the upper median of the differences both read the forged claim (2.5x for a copy of the baseline) as seen. On
      this stand-in (2 cores, four children, their autogroup at nice -8, root's as in round 21): oracle windows
      110-330 ms against the candidate's 32-100 in every counted round; credited 2.0-2.4x in every run at this setting
      (8 of 8; 1.7-1.9x in 4 of 4 at a claim of 2); the same forged claim without the children was quarantined in
      every run (the clock saw 0.66-0.97x). The unit test shows the mechanism without a judge: ``pause`` +
      ``still_running() == []``, then the process runs. Fix: hold the state, do not sample it: a cgroup v2 freezer per
      candidate worker (``cgroup.freeze``; SIGCONT does not thaw a frozen cgroup; wait for ``frozen 1`` in
      ``cgroup.events``), or at least check after the oracle's round that the candidate's CPU time (utime+stime of
      every thread, or the cgroup's ``cpu.stat``) did not grow while it was "stopped", and refuse if it did.

   B. **Threads behind a zombie leader** (``tests/cheats/round22_chains_behind_a_zombie_leader.py``, CLOSED).
      ``running_threads`` reads /proc/PID/stat and skips the whole process when it says Z or X. A process whose first
      thread left by the thread's own exit system call (``SYS_exit``, not ``exit_group``) shows the leader's Z there
      for as long as its other threads live, and they are never looked at. Round 21's chains (threads inside long
      memfd writes, which SIGSTOP does not stop) as threads of such processes: the scan passes and the oracle's round
      runs beside them. Made to last both counted rounds (round 1's window and the reveal before round 2): oracle
      windows 120-390 ms against 30-100; at the autogroup's nice -6, credited 1.6-3.0x in 9 of 9 runs (at -8, 6 of 7:
      the other slowed the oracle tenfold and was left unresolved, credit 1.0). Round 21's own cheat is stopped by the
      wait (its oracle round unslowed). Fix: in ``running_threads``, list /proc/PID/task of every process of the group
      or user whatever its leader's state, and skip a thread only on its own Z/X (or use the freezer of A, which
      counts every task of the cgroup).

   C. **Hopping past the uid scan** (``tests/cheats/round22_hops_past_the_uid_scan.py``, CLOSED behind the uid wall;
      mechanism only: this machine cannot put a whole judge behind the wall). ``signal_user`` signals the pids of a
      listing of /proc and ``running_threads`` reads the pids of a listing: a helper in a session of its own that
      forks and exits over and over is a new pid every ~1 ms, gone before it is signalled or read, its child born
      after the listing. ``HOPPER`` run under another uid against the real ``WorkerProcess.pause``/``still_running``:
      the wait returned "all stopped" in every trial, and in 37 of 40 trials (12 chains) the chains went on at about
      full rate (150-350 slices of work in 0.2 s) while the judge would time the oracle. Without the uid wall the same
      cheat (its helpers then simply not stopped: round 3's open hole) was credited 2.6x. ``Isolation.kill_leftovers``
      already handles this process with ``kill(-1, SIGKILL)`` sent as the user. Fix: stop the same way (``kill(-1,
      SIGSTOP)`` from a helper running as the candidate's uid: the kernel signals every process of the user at once,
      forks in flight included), then wait; or the cgroup freezer of A. (Without the uid wall a helper in a session of
      its own is not stopped at all: round 3, open.)

   **Closed** (the lead, after this round): ``running_threads`` lists every process's threads and judges each by its
   own state (B); behind the uid wall ``signal_user`` stops and continues with ``kill(-1, sig)`` sent as the
   candidate's user (C); and ``_alone(settled=True)`` reads every thread's CPU time, its count of runs on a CPU and
   which threads there are once the candidate shows stopped, again after the oracle's round, and refuses a candidate
   that ran meanwhile (a thread run again, born or ended)
   (``runners/stopped.py`` ``cpu_times``, ``ran_since``: A, and C's hoppers where a scan sees them born). A and B's
   armed runs are refused at ``timing`` (A: "ran while the judge timed the other side").

2. **The paired estimator** (runners/corroboration.py ``corroborate``).

   D. **Shedding the checkpoints** (arithmetic on H200-like numbers; the GPU form, a worker that patches
      runners/checkpoints.py in its own process to take every trace in one launch after the pass, right for a kernel
      that defers nothing, is a prediction and no cheat module was built: the CPU stand-in's checkpoints cost nothing
      next to the interpreter's calls). The checkpoints' device time, measured on the oracle alone, is taken off the
      oracle's shortest pass, and the candidate's pass is that plus the rounds' wall differences, which hold the
      candidate's own checkpoint time: a candidate whose checkpoints cost nothing is credited ``(P - C) / (P - 2C)``
      (P the oracle's pass with its checkpoints C), and C is not among what the credit holds against a worker
      (``shaveable_b``: lead and commitments, and the credit only the lead). 256 checkpoints of ~4 us in a 12 ms pass:
      a parity kernel credited 1.14x. Fix: add the oracle's checkpoint time to the credited pass as the lead is
      (``credit = pass_b / (pass_c + lead + checks)``; an honest candidate then loses C/P), or take the traces where
      the candidate's process cannot reorder them (the judge's own stream reading the candidate's buffers).

   Tried, not a gain: shaping its own walls (every slot is shown or opened and checked: its wall cannot be shorter
   than its work; lengthening rounds only raises the upper median); widening the allowance by disturbing one oracle
   round's extra (the allowance only lets the claim pass; what is credited is held to what the clock saw, and a
   disturbance over half the pass leaves the size unresolved, credit 1.0; B's tenfold run met exactly that).

3. **The re-check after a quarantine, and the oracle replaced after any evaluation it was left in mid-request**
   (runners/judge_steps.py ``evaluate``, runners/sandbox.py). E: after A's and B's evaluations (processes forked into
   the worker's group, threads of zombie-leader processes) the next evaluation on the same evaluator, the baseline
   against itself, meets a working oracle and no leftover process (all of them died with the worker's group): held.
   Read, not found: the re-check's swallowed refusals (a stage other than correctness) keep the quarantine, itself a
   refusal; a harness error ("baseline") in the re-check is not treated differently by the search or the verification
   (evolver/, bot/verify.py).

Runs on the timed CPU stand-in (tests/test_judge_attacks.py ``_SHIM``, torch one thread a worker), one judge
subprocess for every evaluation of the module (A twice, B twice, A's forged claim alone, the baseline); the module
takes 46-69 s on 2 cores (beside another engineer's test run), the unit tests about 5 s of it. Run 8 times before
the fixes: the six holes failed every time, the two plain tests passed every time.
"""
from __future__ import annotations

import ast
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import types

import pytest
from conftest import CHEATS
from test_judge_attacks_round4 import _timed_judge

from runners.corroboration import corroborate, credit_cap
from runners.isolation import UID_RANGE, Isolation, _claim, _uid_in_use, release
from runners.processes import WorkerProcess
from runners.stopped import ran_since, running_threads

WAKES = "round22_wakes_itself_after_the_judges_check.py"
ZOMBIE = "round22_chains_behind_a_zombie_leader.py"
HOPS = "round22_hops_past_the_uid_scan.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 35 ms on the stand-in (round 21's)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = 2.5  # the forged claim, as round 21's
ARMED_RUNS = 2  # each attack credited in nearly every run tried: either run credited shows the hole
ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="the children's session weight (autogroup nice) needs "
                                                    "CAP_SYS_NICE here, as round 21's chains")
SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(os.uname().machine)


def _source(name: str, **marks: str) -> str:
    text = (CHEATS / name).read_text()
    for key, value in marks.items():
        text = text.replace(f"@{key}@", value)
    return text


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> dict:
    wakes = dict(CLAIM=str(CLAIM), NICE="-8", BURNERS="4")
    armed = _source(WAKES, ARMED="armed", **wakes)
    alone = _source(WAKES, ARMED="no", **wakes)
    zombie = _source(ZOMBIE, ARMED="armed", CLAIM=str(CLAIM), NICE="-6", MB="256", PER_CHAIN="12")
    plan = [*[(armed, 5 + k) for k in range(ARMED_RUNS)], *[(zombie, 7 + k) for k in range(ARMED_RUNS)],
            (alone, 9), ("BASELINE", 10)]
    results = _timed_judge(rms_bundle, tmp_path_factory.mktemp("round22"),
                           [(source, "verify", seed, NUMBERS) for source, seed in plan], SYMBOLS, one_thread=True)
    return {"wakes": results[:ARMED_RUNS], "zombie": results[ARMED_RUNS:2 * ARMED_RUNS],
            "alone": results[2 * ARMED_RUNS], "next": results[2 * ARMED_RUNS + 1]}


def _credited(ev: dict) -> float | None:
    return max(s or 0.0 for s in ev["speedups"]) if ev["ok"] else None


def _seen(evs: list[dict]) -> str:
    return "; ".join(f"{ev['stage']} ok={ev['ok']} speedups {ev['speedups']} judge ratios {ev['judge_ratios']} "
                     f"walls (ms, oracle then candidate) {ev['window_ms']} {ev['error'][:160]}" for ev in evs)


def _stub(pid: int, uid: int | None = None) -> WorkerProcess:
    """The judge's own handle on a worker (``pause``, ``still_running``, ``resume``) around a process of the test's."""
    worker = WorkerProcess.__new__(WorkerProcess)
    worker.proc, worker.uid = types.SimpleNamespace(pid=pid), uid
    return worker


def _read_until(fd: int, marker: bytes, within_s: float = 10.0) -> None:
    data, deadline = b"", time.monotonic() + within_s
    while marker not in data and time.monotonic() < deadline:
        try:
            data += os.read(fd, 4096)
        except BlockingIOError:
            time.sleep(0.005)
    assert marker in data, data[-200:]


def _progress(fd: int, seconds: float) -> int:
    """Bytes the test's processes write to ``fd`` (one a slice of work) over ``seconds``."""
    count, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            count += len(os.read(fd, 65536))
        except BlockingIOError:
            time.sleep(0.002)
    return count


# ---- A. a process that wakes itself after the judge's check --------------------------------------------------------

@ROOT
def test_a_worker_whose_processes_wake_themselves_after_the_check_earns_no_credit(runs):
    credited = [_credited(ev) for ev in runs["wakes"]]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}: {_seen(runs['wakes'])}"
    # refused for what it did (it ran while stopped), not only held to its clock
    assert all("ran while the judge timed" in ev["error"] for ev in runs["wakes"]), _seen(runs["wakes"])


def test_the_forged_claim_alone_is_quarantined(runs):
    """A's control: the same worker without its children (a copy of the baseline claiming 2.5x) is not credited."""
    ev = runs["alone"]
    assert not ev["ok"] or _credited(ev) <= 1.25, _seen([ev])


# a worker stand-in (the group's leader, asleep) and a child in its group with a SIGCONT watchdog: it plays stopped for
# 10 ms after its leader stops, then writes a byte every 0.5 ms of work until its leader runs again
_WAKES_ITSELF = r"""
import ctypes, os, signal, time


class Sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_int * 12)]


class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class Itimerspec(ctypes.Structure):
    _fields_ = [("interval", Timespec), ("value", Timespec)]


def state(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0]


leader = os.getpid()
if os.fork() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    signal.signal(signal.SIGCONT, lambda *a: None)  # an ignored timer signal parks the timer
    timer = ctypes.c_void_p()
    assert libc.timer_create(1, ctypes.byref(Sigevent(None, int(signal.SIGCONT), 0)), ctypes.byref(timer)) == 0
    tick = Itimerspec(Timespec(0, 0), Timespec(0, 3_000_000))  # a one-shot 3 ms ahead, re-armed at every look
    first = None
    while True:
        libc.timer_settime(timer, 0, ctypes.byref(tick), None)
        if state(leader) != b"T":
            first = None
            time.sleep(0.0005)
            continue
        first = first or time.monotonic()
        if time.monotonic() - first < 0.01:
            os.kill(os.getpid(), signal.SIGSTOP)
            continue
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0005:
            pass
        os.write(1, b".")
os.write(1, b"ready\n")
time.sleep(120)
"""


def test_a_process_woken_by_its_own_timer_does_not_run_while_the_judge_has_it_stopped():
    proc = subprocess.Popen([sys.executable, "-c", _WAKES_ITSELF], stdout=subprocess.PIPE, start_new_session=True)
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    seen = []
    try:
        _read_until(fd, b"ready\n")
        time.sleep(0.05)
        worker = _stub(proc.pid)
        for _ in range(3):
            worker.pause()
            left = worker.still_running()
            before = worker.cpu_times()
            ran = _progress(fd, 0.2)  # what ran while the judge would time the oracle
            caught = ran_since(before, worker.cpu_times())  # what the judge reads after the oracle's round
            worker.resume()
            _progress(fd, 0.05)
            seen.append((left, ran, caught))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # the judge refuses it: threads still running at the bound, or CPU time spent while it was seen stopped
    assert all(left or caught for left, ran, caught in seen), f"(still running, bytes of work, caught): {seen}"
    assert any(ran for _, ran, _ in seen), seen  # the set-up itself: it does wake


# ---- B. threads behind a zombie leader ------------------------------------------------------------------------------

@ROOT
def test_round_21s_chains_behind_a_zombie_leader_earn_no_credit(runs):
    credited = [_credited(ev) for ev in runs["zombie"]]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}: {_seen(runs['zombie'])}"
    assert all(not ev["ok"] and ev["stage"] == "timing" for ev in runs["zombie"]), _seen(runs["zombie"])


_ZOMBIE_LEADER = r"""
import ctypes, os, sys, threading, time


def spin():
    while True:
        pass


threading.Thread(target=spin, daemon=True).start()
os.write(1, b"ready\n")
time.sleep(0.05)
ctypes.CDLL(None).syscall(int(sys.argv[1]), 0)  # SYS_exit: the first thread alone
"""


@pytest.mark.skipif(SYS_EXIT is None, reason="the exit system call's number on this architecture")
def test_a_running_thread_behind_a_zombie_leader_is_seen():
    proc = subprocess.Popen([sys.executable, "-c", _ZOMBIE_LEADER, str(SYS_EXIT)], stdout=subprocess.PIPE,
                            start_new_session=True)
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    try:
        _read_until(fd, b"ready\n")
        time.sleep(0.3)
        states = {}
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            with open(f"/proc/{proc.pid}/task/{tid}/stat", "rb") as f:
                states[int(tid)] = f.read().rsplit(b")", 1)[1].split()[0].decode()
        assert states.get(proc.pid) == "Z" and "R" in states.values(), states  # the set-up itself
        running = running_threads(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert running, f"threads {states}: the spinning thread is not reported"


# ---- C. hopping past the uid scan -----------------------------------------------------------------------------------

def _hopper() -> str:
    """The cheat's ``HOPPER`` program (a string constant of the module, read without importing it)."""
    for node in ast.parse((CHEATS / HOPS).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "HOPPER" for t in node.targets):
            return node.value.value
    raise AssertionError("no HOPPER in the cheat")


# Root's, as the judge is: the worker stand-in leaves its session for one of its own and becomes the candidate's uid
# (the interpreter under /root cannot be started by another user, so it drops its ids after starting), then starts
# CHAINS hoppers in sessions of their own, each running the cheat's program. The parent is a subreaper, so that the
# hoppers' orphans are reaped here (this machine's init reaps slowly).
_BEHIND_THE_WALL = r"""
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
uid, chains, flag, program = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
worker = os.fork()
if worker == 0:
    os.setsid()
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    for _ in range(chains):
        if os.fork() == 0:
            os.setsid()
            sys.argv = ["hopper", str(os.getppid()), flag]
            exec(compile(program, "HOPPER", "exec"))
    while True:
        time.sleep(1)
print(f"worker {worker}", flush=True)
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.01)
"""


HOP_CHAINS, HOP_TRIALS = 12, 8  # some chain escaped in 37 trials of 40 tried (8 chains: 16 of 20)


def _free_uid() -> int:
    span = UID_RANGE[1] - UID_RANGE[0]
    start = random.randrange(span)
    for offset in range(span):
        uid = UID_RANGE[0] + (start + offset) % span
        if not _uid_in_use(uid) and _claim(uid):
            return uid
    pytest.skip("no free uid")


@pytest.mark.skipif(os.geteuid() != 0, reason="running processes as another user needs root")
def test_helpers_hopping_between_processes_are_stopped_behind_the_uid_wall():
    uid = _free_uid()
    handle, flag = tempfile.mkstemp(prefix="ks-round22-hop-", dir="/dev/shm")
    os.write(handle, b"1")  # the cheat's flag: hop (and burn while the worker is stopped)
    os.close(handle)
    os.chmod(flag, 0o644)
    proc = subprocess.Popen([sys.executable, "-c", _BEHIND_THE_WALL, str(uid), str(HOP_CHAINS), flag, _hopper()],
                            stdout=subprocess.PIPE)
    fd = proc.stdout.fileno()
    seen = []
    try:
        worker_pid = int(proc.stdout.readline().split()[1])
        os.set_blocking(fd, False)
        _progress(fd, 0.3)
        worker = _stub(worker_pid, uid)
        for _ in range(HOP_TRIALS):
            worker.pause()
            left = worker.still_running()
            _progress(fd, 0.02)  # written before the pause
            ran = _progress(fd, 0.2)  # slices of work while the judge would time the oracle
            worker.resume()
            _progress(fd, 0.05)
            seen.append((len(left), ran))
    finally:
        Isolation.kill_leftovers(uid)
        time.sleep(0.1)  # the reaper reaps them
        proc.kill()
        proc.wait()
        os.unlink(flag)
        release(uid)
    # refused (threads left running at the bound), or nothing ran once every thread was seen stopped (a few bytes
    # may still be in flight from processes caught by the second pass)
    assert all(left or ran <= 20 for left, ran in seen), f"(threads still running, slices of work): {seen}"


# ---- D. shedding the checkpoints ------------------------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason=(
    "runners/corroboration.py takes the oracle's checkpoint time off its pass, and the candidate's pass is that plus the "
    "rounds' wall differences, which hold the candidate's own checkpoints: a worker whose checkpoints cost nothing "
    "(patched in its own process: every trace taken in one launch after the pass) is credited (P - C) / (P - 2C), 1.14x "
    "for a parity kernel at 256 checkpoints of ~4 us in a 12 ms pass. Fix: count the oracle's checkpoint time in the "
    "credited pass as the lead is, or take the traces outside the candidate's reach"))
def test_a_worker_that_sheds_its_checkpoints_is_credited_nothing_for_it():
    """H200-like numbers at decode size (microseconds): 8192 slots, a pass of 12 ms holding 1 ms of checkpoints, the
    extra around it (lead 120, commitments 600, fill and round trip) about 1.5 ms; four rounds (the search's), the first
    dropped. The candidate's kernel is the baseline's; its walls lack the checkpoints' 1 ms. Its worker claims what the
    clock will see."""
    check_us, lead_us, commit_us = 1000.0, 120.0, 600.0
    passes_b = [12_000.0, 12_050.0, 11_980.0, 12_020.0]
    walls_b = [p + e for p, e in zip(passes_b, [1_600.0, 1_500.0, 1_540.0, 1_520.0])]
    walls_c = [w - check_us + d for w, d in zip(walls_b, [40.0, -30.0, 20.0, 10.0])]  # its own noise, either way
    shaveable = [lead_us + commit_us] * 4
    baseline_us, tolerance = 1.46, 0.05
    honest = corroborate(walls_b, passes_b, walls_b, baseline_us, baseline_us, tolerance, 150.0, shaveable, 8192,
                         [lead_us] * 4, [check_us] * 4)
    assert honest.ok and credit_cap(honest, tolerance) <= 1 + tolerance  # the same kernel, its checkpoints run
    claim = 1.14
    v = corroborate(walls_b, passes_b, walls_c, baseline_us, baseline_us / claim, tolerance, 150.0, shaveable, 8192,
                    [lead_us] * 4, [check_us] * 4)
    credited = min(claim, credit_cap(v, tolerance)) if v.ok else None
    assert credited is None or credited <= 1 + tolerance, (v, "credited", credited)


# ---- E. the next evaluation -----------------------------------------------------------------------------------------

def test_the_evaluation_after_them_meets_a_working_oracle_and_no_leftover(runs):
    """After A's and B's evaluations (children in the worker's group, threads of zombie-leader processes) the baseline
    against itself on the same evaluator meets a working oracle (no reply out of turn, stage not ``baseline``): what
    they started died with the worker's group. The stand-in's clock may still quarantine the baseline against itself on
    its noise now and then (round 21), which is not this."""
    ev = runs["next"]
    assert ev["stage"] != "baseline" and "out of turn" not in ev["error"], json.dumps(ev)[:800]
    assert ev["ok"] or ev["stage"] == "timing", json.dumps(ev)[:800]
