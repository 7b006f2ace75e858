"""Attacks on the judge, twenty-fourth round: the defences round 23 left (runners/armed.py ``could_slow``,
runners/interrupts.py ``storm``), and what else the judge takes from the candidate's side of the clock.

A. **Timerfds in a thread's own file table** (``tests/cheats/round24_hides_its_timers_and_inflates_its_own_interrupts.py``
   with HIDE "thread", CLOSED: runners/armed.py now reads every thread's table, each table once by ``kcmp``).
   ``could_slow`` listed ``/proc/PID/fd``, which is the file table of the
   process's *first thread*. A thread may ``unshare(CLONE_FILES)`` (or be made by ``clone`` without CLONE_FILES) and
   then holds a table of its own, listed only under ``/proc/PID/task/TID/fd``; and a process whose first thread has
   exited (its leader a zombie while the other threads live, round 22's B) shows no table at all under /proc/PID/fd.
   Timerfds (and io_uring instances) opened there are not counted: ``held_timers`` reads 0 for a stopped stand-in whose
   thread holds 50 armed timerfds (the unit tests below), and at the judge 9000 of them, armed through the oracle's
   counted rounds (each an interrupt, 10-25 us on this VM), are never refused: 3 of 3 runs without B's inflation went
   unrefused and were credited 1.00x only because ``storm`` saw the flood (38-43 interrupts a ms against the
   candidate's 0.3-0.5). The same 9000 in the worker's own table are refused ("9000 armed timerfd(s)"). Fix
   (runners/armed.py ``_descriptors``): read the table of every thread, ``/proc/PID/task/TID/fd`` and ``fdinfo``, not the
   process's; count each table once (threads that share one: ``kcmp(pid1, pid2, KCMP_FILES, 0, 0) == 0``; without kcmp,
   sum the armed timerfds of threads whose fd listings differ); a zombie leader's process through its live threads.

B. **The candidate raises the oracle's allowance for interrupts** (the same cheat with INFLATE "yes", CLOSED: the
   candidate's rate raises the allowance by at most ``CANDIDATE_CAP_PER_MS``, 5 a ms: at most 15 a ms in all).
   ``storm`` compares the machine's interrupts a ms (``/proc/stat``'s total, every core) over the oracle's rounds with
   5 + 2x the candidate's own. The candidate's own rounds are its to make noisy, at no cost to itself: its worker pins
   its thread to one core, and while its own window is timed a helper of its group, pinned to the other core (idle then:
   the judge and the oracle wait on their pipes), sleeps 1 us at a time with a timer slack of 1 ns: about 38 timer
   interrupts a ms on this VM, none on the candidate's core. The oracle's rounds may then take 5 + 2 x 38 = 81 a ms
   unflagged; the flood (9000 timerfds, about 60 a ms over both cores: 38-45 measured over each of the oracle's
   counted windows) fits. With the timers in flight (round 23's A', which no listing shows, HIDE "flight"): credited
   2.50x, 2.56x and 2.54x of a forged 2.5x for a copy of the baseline in 3 of 3 runs while this round was written, the
   clock seeing 2.4-2.6x on every counted round; with A's thread, 11 of 11 runs credited 2.27-2.52x (the oracle's
   windows 66-95 ms against the candidate's 40-46). Without the helper the same flood is flagged in every run (1.00x);
   the forged claim without any timers is quarantined (the clock at 1.00x). With another process busy on the helper's
   core (as under ``-n 2``) the helper makes about 15 a ms and the flood is flagged in 2 runs of 3 (the third credited
   2.49x): B's end-to-end tests skip there. Timers armed on that core for its own window (interrupts need no
   scheduling) would not depend on the load; not built. Fix (runners/interrupts.py and
   runners/judge_clock.py ``_clock_rounds``): count each side's interrupts on the cores where that side's worker ran
   (``/proc/interrupts`` per-CPU columns, LOC and the rest, or ``/proc/stat``'s ``cpuN`` irq/softirq time; the worker's
   cores from ``/proc/PID/task/*/stat`` field 39 sampled around the request, or pin each worker to a known core for
   the clock), so that interrupts a candidate makes where its own work is not raise nothing; or hold the oracle's rate
   to a reference of its own (its rounds' rate with the candidate's processes ended, or the oracle's rate in its
   samples), never to the candidate's.

C. **The checkpoints' time is measured while the candidate runs** (arithmetic on H200-like numbers, CLOSED: the
   oracle's reveal that times them now runs inside ``_alone(self.oracle)``, and the rounds' smallest is taken off).
   ``_clock_rounds`` asks the oracle for ``reveal(..., time_checks=True)`` outside ``_alone``: the candidate is neither
   stopped nor held while the oracle times its checkpoints alone (runners/checkpoints.py ``time_alone``, the events'
   elapsed time), and on a GPU its process can keep the device busy exactly then (its worker waits for its own reveal;
   a thread of it can launch). That time (the median over counted rounds, up to half the oracle's shortest pass) is
   taken off both passes, which magnifies every difference the clock sees: a kernel truly 1.15x faster, its worker
   inflating the oracle's checkpoint time to 4.5 ms of a 12 ms pass, is credited 1.30x (1.20x with the real 0.3 ms), and
   round 22's D (a worker whose own checkpoints cost nothing) is credited more the same way. Not built on the CPU stand-in
   (its checkpoints take microseconds next to the interpreter's calls, and a process of the judge's own uid could as
   well stop the oracle). Fix: time the checkpoints alone inside ``_alone(self.oracle, settled=True)`` (a request of
   its own after the reveal), with the candidate's device queue drained first on a GPU; and take the smallest of the
   rounds' ``checks_us`` rather than their median (inflation only lengthens it).

D. **Same-named kernels matched in start order** (runners/kernel_share.py ``attributed_us``, unit, CLOSED where the
   profiler links each device event to its launch call: runners/kernel_share.py ``attributed_us`` orders by that link,
   and matches nothing where an event lacks one; round 25's D). The
   profiled call's device events are matched one by one, in the order they *started*, to the call's launches of the
   name in the order they were *made*. Two streams break that: a candidate whose own ``_fwd_kernel`` (a token launch)
   is queued on a side stream behind a device sleep while another package's ``_fwd_kernel`` doing the work starts at
   once gets that kernel's time as its own (its own share passes where it should be refused: work hidden in another
   package's kernel). Only what the worker reports is matched, as the docstring says, but this needs no forging: the
   profiler's true events. Fix: match by the launch's correlation id (the profiler links each kernel event to its
   ``cudaLaunchKernel``: record the correlation of each launch in the launch hook) or, without it, match only where all
   of the call's kernels ran on one stream (events carry their stream), else leave the name uncounted.

Read, not found: ``ran_since`` after the oracle's round (a stopped thread is put on no CPU; a thread created by a
clone racing the stop is restarted) and its keys (pid, tid, start time); ``could_slow`` on POSIX timers (per process,
``/proc/PID/timers`` lists them whatever thread made them, and a zombie leader's too); a periodic POSIX timer whose
signal is ignored (re-armed in the kernel at most once a jiffy before 6.13; not at all on this 6.18 kernel); ITIMER_REAL
(one a process, fires once while stopped: 64 processes at most); timers held by a process's *other* file tables are the
only listing gap found. Not tried (they cost other engineers' runs on this machine): dirty page cache and memory pressure
during the oracle's round (round 23's list).

Runs on the timed CPU stand-in (tests/test_judge_attacks.py ``_SHIM``, torch one thread a worker), one judge subprocess
for the module's four evaluations (about 25 s on 2 cores), and unit tests of a few seconds.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types

import pytest
from conftest import CHEATS
from test_judge_attacks_round4 import _timed_judge

from runners import interrupts as machine_irqs
from runners.armed import could_slow, held_timers
from runners.corroboration import corroborate, credit_cap
from runners.kernel_share import attributed_us
from runners.processes import WorkerProcess
from runners.stopped import ran_since

CHEAT = "round24_hides_its_timers_and_inflates_its_own_interrupts.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 38 ms on the stand-in (rounds 21-23)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = 2.5  # the forged claim, as rounds 21-23
TIMERS, SPAN_MS = "900", "20"  # within the 1024 open files a candidate may hold (round 30; 9000 over 200 ms before)


def _source(hide: str, inflate: str) -> str:
    text = (CHEATS / CHEAT).read_text()
    for key, value in {"HIDE": hide, "INFLATE": inflate, "CLAIM": str(CLAIM), "TIMERS": TIMERS,
                       "SPAN_MS": SPAN_MS}.items():
        text = text.replace(f"@{key}@", value)
    return text


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> dict:
    plan = [(_source("flight", "yes"), 41), (_source("flight", "yes"), 42), (_source("thread", "yes"), 43),
            (_source("thread", "no"), 44)]
    results = _timed_judge(rms_bundle, tmp_path_factory.mktemp("round24"),
                           [(source, "verify", seed, NUMBERS) for source, seed in plan], SYMBOLS, one_thread=True)
    return {"inflated": results[:3], "thread": results[3]}


def _credited(ev: dict) -> float | None:
    return max(s or 0.0 for s in ev["speedups"]) if ev["ok"] else None


def _seen(evs: list[dict]) -> str:
    return "; ".join(f"{ev['stage']} ok={ev['ok']} speedups {ev['speedups']} judge ratios {ev['judge_ratios']} "
                     f"walls (ms, oracle then candidate) {ev['window_ms']} irq/ms (oracle) "
                     f"{[[q.get('irq') for q in p or []] for p in ev['parts'] or []]} {ev['messages']} "
                     f"{ev['error'][:160]}" for ev in evs)


def _flooded(ev: dict) -> bool:
    """The counted oracle rounds (the first is left out) saw the flood: 15 interrupts a ms or more machine-wide, at
    their median, as the judge's rule reads them (runners/interrupts.py ``storm``). One round's spike alone is the
    host's (a CI simulation and a quiet run of this file each saw 18 a ms in one round of three with 900 timers, which
    cannot flood), and the clock's upper median over the rounds already holds a single slowed round."""
    import statistics

    return any(statistics.median([q.get("irq") or 0.0 for q in part[1:]]) >= 15.0
               for part in ev["parts"] or [] if part and len(part) > 1)


# ---- A. timerfds in a thread's own file table -----------------------------------------------------------------------

def test_a_worker_whose_timers_sit_in_a_threads_own_table_is_refused_for_them(runs):
    ev = runs["thread"]
    assert not ev["ok"] and "could slow the baseline while it is stopped" in ev["error"], _seen([ev])


def test_a_worker_whose_timers_sit_in_a_threads_own_table_earns_no_credit(runs):
    """Held today by runners/interrupts.py alone: the flood lands on the oracle's counted rounds, the candidate's own
    rounds are quiet, and the clock credits nothing (or quarantines the forged claim)."""
    ev = runs["thread"]
    credited = _credited(ev)
    assert credited is None or credited <= 1.25, _seen([ev])


# ---- B. the candidate's own interrupts raise the oracle's allowance -------------------------------------------------

def test_a_flood_behind_the_candidates_own_interrupts_earns_no_credit(runs):
    evs = runs["inflated"]
    credited = [_credited(ev) for ev in evs]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}: {_seen(evs)}"


def test_the_clock_says_where_the_flood_landed_behind_the_candidates_own_interrupts(runs):
    evs = runs["inflated"]
    assert all(any("interrupts a ms" in (m or "") for m in ev["messages"]) for ev in evs if _flooded(ev)), _seen(evs)
    # Before round 30 the 9000 timers flooded some counted round in every run. A candidate now holds at most 1024
    # open files, and 900 timers made at most 4.5 interrupts a ms in a round: no flood, and the forged claim refused
    assert all(not ev["ok"] for ev in evs), _seen(evs)


_INFLATER_PRELUDE = "_INFLATER = r\"\"\""


def _inflater_source() -> str:
    text = (CHEATS / CHEAT).read_text()
    start = text.index(_INFLATER_PRELUDE) + len(_INFLATER_PRELUDE)
    return text[start:text.index('"""', start)]


def test_a_helper_on_an_idle_core_raises_the_candidates_rate_but_not_the_oracles_allowance():
    """The mechanism of B: the cheat's helper, pinned to the last core, told to go: the machine's interrupts a ms (as the
    judge reads them over a window) reach a rate at which ``storm`` let the oracle take a flood of twice that. The
    candidate's rate now raises the allowance by at most ``CANDIDATE_CAP_PER_MS``. Rounds of ~40 ms, as the stand-in's
    windows."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs a core the candidate's thread does not use")
    proc = subprocess.Popen([sys.executable, "-c", _inflater_source(), str(cpus[-1])], stdin=subprocess.PIPE,
                            start_new_session=True)
    try:
        time.sleep(0.2)
        quiet = _rate(0.04)
        proc.stdin.write(b"g")
        proc.stdin.flush()
        time.sleep(0.01)
        loud = max(_rate(0.04) for _ in range(3))
        proc.stdin.write(b"s")
        proc.stdin.flush()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert loud >= 10.0 and loud >= quiet + 8.0, (quiet, loud)  # about 38 against 0.3-0.5 on this VM, idle
    flood = machine_irqs.FLOOR_PER_MS + machine_irqs.RATIO * loud - 1.0  # what the oracle's rounds could take
    assert machine_irqs.storm([flood] * 3, [loud] * 3), (quiet, loud, flood)  # flagged with the helper
    assert machine_irqs.storm([flood] * 3, [quiet] * 3), (quiet, loud, flood)  # and without it
    most = machine_irqs.FLOOR_PER_MS + machine_irqs.RATIO * machine_irqs.CANDIDATE_CAP_PER_MS
    assert machine_irqs.storm([most + 1.0] * 3, [loud] * 3) and not machine_irqs.storm([most - 1.0] * 3, [loud] * 3)


def _rate(seconds: float) -> float:
    before, t = machine_irqs.total(), time.perf_counter()
    time.sleep(seconds)
    return machine_irqs.per_ms(before, machine_irqs.total(), (time.perf_counter() - t) * 1e6) or 0.0


# ---- A, the mechanism: what could_slow reads of a stopped process holding armed timerfds -----------------------------
# a stand-in for the candidate's worker: 50 timerfds armed 100 s out (or an io_uring instance), made in the first
# thread's table ("table"), in a thread that unshared its files ("thread"), or in a thread whose process's first thread
# then exits ("zombie"); it prints its pid and the holding thread's tid, then waits
_HOLDER = r"""
import ctypes, os, sys, threading, time
mode, kind = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)


class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class Itimerspec(ctypes.Structure):
    _fields_ = [("interval", Timespec), ("value", Timespec)]


def hold():
    if mode == "thread":
        assert libc.unshare(0x400) == 0, ctypes.get_errno()  # CLONE_FILES: a table of this thread's own
    if kind == "io_uring":
        params = (ctypes.c_uint32 * 30)()
        assert libc.syscall(425, 8, params) >= 0, ctypes.get_errno()  # io_uring_setup
    else:
        value = Itimerspec(Timespec(0, 0), Timespec(100, 0))
        for _ in range(50):
            fd = libc.timerfd_create(1, 0o2004000)
            assert fd >= 0 and libc.timerfd_settime(fd, 0, ctypes.byref(value), None) == 0
    os.write(1, b"%d %d\n" % (os.getpid(), threading.get_native_id()))
    time.sleep(120)


if mode == "table":
    hold()
threading.Thread(target=hold).start()
if mode == "zombie":
    time.sleep(0.3)
    libc.syscall({"x86_64": 60, "aarch64": 93}[os.uname().machine], 0)  # SYS_exit: the first thread alone
time.sleep(120)
"""


def _stub(pid: int) -> WorkerProcess:
    worker = WorkerProcess.__new__(WorkerProcess)
    worker.proc, worker.uid = types.SimpleNamespace(pid=pid), None
    return worker


def _held(mode: str, kind: str = "timerfd") -> dict:
    """The stand-in stopped as the judge stops a candidate: what it holds by its thread's own listing, and what the
    judge's checks read (threads still running, ``could_slow``, ``held_timers``, ``ran_since`` over 50 ms)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, mode, kind], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = proc.stdout.readline().split()
        if not line:
            err = proc.stderr.read().decode(errors="replace")
            if kind == "io_uring":
                pytest.skip(f"no io_uring here: {err[-200:]}")
            raise AssertionError(err[-2000:])
        pid, tid = line[0].decode(), line[1].decode()
        time.sleep(0.4)  # the zombie's first thread has left
        fds = os.listdir(f"/proc/{pid}/task/{tid}/fd")
        links = [os.readlink(f"/proc/{pid}/task/{tid}/fd/{fd}") for fd in fds]
        worker = _stub(proc.pid)
        worker.pause()
        left = worker.still_running()
        before = worker.cpu_times()
        time.sleep(0.05)
        seen = {"left": left, "could_slow": could_slow(before), "held": held_timers({pid}),
                "ran": ran_since(before, worker.cpu_times()),
                "timerfds": links.count("anon_inode:[timerfd]"), "rings": links.count("anon_inode:[io_uring]")}
        worker.resume()
        return seen
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_armed_timerfds_in_the_first_threads_table_are_refused():
    seen = _held("table")
    assert seen["timerfds"] == 50 and not seen["left"] and not seen["ran"], seen  # the set-up
    assert "50 armed timerfd(s)" in seen["could_slow"], seen


@pytest.mark.parametrize("mode", ["thread", "zombie"])
def test_armed_timerfds_held_outside_the_first_threads_table_are_there(mode):
    """The set-up of the refusal below: the 50 timerfds are open and armed in the holding thread's table, and the
    stopped stand-in runs nothing while stopped."""
    seen = _held(mode)
    assert seen["timerfds"] == 50 and not seen["left"] and not seen["ran"], seen


@pytest.mark.parametrize("mode", ["thread", "zombie"])
def test_armed_timerfds_held_outside_the_first_threads_table_are_refused(mode):
    seen = _held(mode)
    assert seen["timerfds"] == 50 and "armed timerfd" in seen["could_slow"], seen


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="io_uring_setup's number on this architecture")
def test_an_io_uring_in_the_first_threads_table_is_refused():
    seen = _held("table", "io_uring")
    assert seen["rings"] == 1 and "io_uring" in seen["could_slow"], seen


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="io_uring_setup's number on this architecture")
def test_an_io_uring_in_a_threads_own_table_is_refused():
    seen = _held("thread", "io_uring")
    assert seen["rings"] == 1 and "io_uring" in seen["could_slow"], seen


# ---- C. the checkpoints' time, measured while the candidate runs ----------------------------------------------------

def test_inflating_the_oracles_checkpoint_time_in_some_rounds_credits_nothing():
    """H200-like numbers (microseconds), as round 22's D: 8192 slots, a 12 ms pass holding 0.3 ms of checkpoints,
    about 1.5 ms around it; four rounds, the first dropped. The candidate's kernel is truly 1.15x faster (its walls
    1.57 ms shorter, with its own noise). Its worker claims 1.5x. The oracle now times its checkpoints with the
    candidate's processes stopped (``_clock_rounds``), so what is left is device work queued before the stop, which
    lands in some rounds, not all: the rounds' smallest checkpoint time is what is taken off (it was their median)."""
    lead_us, commit_us, true_checks = 120.0, 600.0, 300.0
    passes_b = [12_000.0, 12_050.0, 11_980.0, 12_020.0]
    walls_b = [p + e for p, e in zip(passes_b, [1_600.0, 1_500.0, 1_540.0, 1_520.0])]
    gain = 12_000.0 - 12_000.0 / 1.15
    walls_c = [w - gain + d for w, d in zip(walls_b, [40.0, -30.0, 20.0, 10.0])]
    shaveable, baseline_us, tolerance, claim = [lead_us + commit_us] * 4, 1.46, 0.05, 1.5

    def credited(checks_us: list[float]) -> float | None:
        v = corroborate(walls_b, passes_b, walls_c, baseline_us, baseline_us / claim, tolerance, 150.0, shaveable,
                        8192, [lead_us] * 4, checks_us)
        return min(claim, credit_cap(v, tolerance)) if v.ok else None

    honest = credited([true_checks] * 4)
    assert honest is not None and honest <= 1.15 * (1 + tolerance), honest  # what the true checkpoints give
    inflated = credited([true_checks, 4_500.0, true_checks, 4_500.0])  # two counted rounds of three inflated
    assert inflated == honest, ("credited", inflated, "honest", honest)
    # (inflated in every round, 4.5 ms of 12, it would be credited 1.30x: the stop is what holds that)
    assert credited([4_500.0] * 4) > 1.25


# ---- D. same-named kernels, matched in the order they started -------------------------------------------------------

def _profiled(*events):
    """A profile as torch's reports it: device events (name, start, microseconds, the link to their launch call: the
    event's id, CUPTI's correlation id; ``linked_correlation_id`` is the torch op around the launch, none for a Triton
    kernel launched outside one, as on the H200)."""
    from torch.autograd import DeviceType

    def event(name, start, us, link):
        span = types.SimpleNamespace(start=start, elapsed_us=lambda: us)
        return types.SimpleNamespace(name=name, device_type=DeviceType.CUDA, time_range=span, id=link,
                                     linked_correlation_id=0)

    return types.SimpleNamespace(events=lambda: [event(*e) for e in events])


def test_a_token_kernel_started_late_is_not_credited_the_work_of_its_namesake():
    """The candidate's own token ``_fwd_kernel`` launched first, queued on a side stream behind a device sleep; another
    package's ``_fwd_kernel`` doing the work launched second and started at once. The profile's sequence follows the
    launches (the events' links to their launch calls), so the token gets its own 4 us."""
    from runners.timing import _device_sequence

    launches = ["cand.kernels:_fwd_kernel", "vendor.attention:_fwd_kernel"]  # made in this order
    own = ["cand.kernels:_fwd_kernel"]
    sequence = _device_sequence(_profiled(("_fwd_kernel", 950.0, 4.0, 101), ("_fwd_kernel", 10.0, 900.0, 102)))
    assert sequence == [("_fwd_kernel", 900.0, 102), ("_fwd_kernel", 4.0, 101)]  # in start order, with their links
    assert attributed_us(sequence, launches, own) == pytest.approx(4.0)
    # where a link is missing (another torch), nothing is matched: never by start order
    unlinked = _device_sequence(_profiled(("_fwd_kernel", 950.0, 4.0, 0), ("_fwd_kernel", 10.0, 900.0, 0)))
    assert attributed_us(unlinked, launches, own) == 0.0


def test_same_named_kernels_on_one_stream_are_matched_to_their_own_launches():
    """Control: on one stream, launch order is start order, and the candidate's own token gets its own 4 us."""
    launches = ["cand.kernels:_fwd_kernel", "vendor.attention:_fwd_kernel"]
    own = ["cand.kernels:_fwd_kernel"]
    assert attributed_us([("_fwd_kernel", 4.0, 1), ("_fwd_kernel", 900.0, 2)], launches, own) == pytest.approx(4.0)
