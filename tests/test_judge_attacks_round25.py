"""Attacks on the judge, twenty-fifth round: what the last session changed (the stop sent to the candidate's user at
once only where the judge holds it, runners/isolation.py ``signal_user`` and runners/processes.py ``still_running``;
every table of open files counted once, runners/armed.py; the candidate's own interrupt rate capped,
runners/interrupts.py ``CANDIDATE_CAP_PER_MS``; the checkpoints' time taken inside ``_alone(self.oracle)`` and the
rounds' smallest, runners/judge_clock.py ``_clock_rounds`` and runners/corroboration.py; the profile's device events in
launch order, runners/timing.py ``_device_sequence``).

A. **Timers held by aio poll requests** (``tests/cheats/round25_hides_its_timers_in_aio_polls.py``, CLOSED:
   runners/armed.py refuses any aio context it lists; since round 26 a candidate's worker may not make one). A timerfd
   that an aio ``IOCB_CMD_POLL`` request waits on is held by the request (``fget`` until it completes) once its
   descriptor is closed: it is in no table of open files (so the kcmp-counted tables of runners/armed.py see none),
   and an aio context is no file at all (a ``[aio]`` mapping), so ``could_slow`` reads 0 POSIX timers, 0 armed
   timerfds, 0 io_uring instances for a stopped process holding tens of thousands (below: 3000, read while stopped as
   the judge reads them). Nor does RLIMIT_NOFILE bound them (a closed descriptor is free again): ``aio-max-nr``,
   65536 machine-wide, does. And ``interrupts.storm`` is blind to them: timers due at one instant on a core expire in
   one interrupt, each callback completing its aio request (and a kworker releasing the file): about 1-1.5 us of the
   core per timer on this VM. 40000 of them in 8 bursts over 60 ms made a busy loop on their core 1.5-3.4x slower
   while the machine counted 0.5-1 interrupts a ms (under the floor of 5: no inflation of the candidate's own count
   needed; ``test_timers_in_aio_polls_slow_work_beside_them_unflagged``). At the judge (a copy of the baseline
   claiming 2.5x; 60000 timers a flood, aimed at the oracle's window from where round 0 showed it to fall): credited
   2.56x, 2.43x, 2.44x, 2.57x and 3.24x in 5 of 9 runs while this round was written (the oracle's counted windows
   68-131 ms against the candidate's 40-46, 0.6-0.9 interrupts a ms over them); three missed the window and were
   quarantined, one met another job's timer flood (another engineer's run of round 24) and was credited 1.00x.
   Fix (runners/armed.py ``held_timers``/``could_slow``): count aio contexts (``[aio]`` in /proc/PID/maps of every
   process, or ``/proc/sys/fs/aio-nr`` against its value before the candidate started) and refuse a stopped candidate
   holding any, as io_uring; more generally hold the state rather than list it: a cgroup per candidate whose
   ``cpu.stat``/``pressure`` cannot be escaped, or count the oracle's own CPU time lost (``/proc/stat`` irq+softirq
   of its core over its window against the candidate's) instead of interrupts.

B. **The checkpoints' time is measured under a stop that is not held** (runners/judge_clock.py ``_clock_rounds``, CLOSED:
   the reveal is now timed under ``_alone(self.oracle, settled=True)``; the fake-judge test below). The oracle's
   ``reveal(..., time_checks=True)`` ran inside ``_alone(self.oracle)``,
   but not ``settled``: the candidate is sent SIGSTOP (its group, and behind the uid wall two /proc passes over its
   user, no longer ``kill(-1)``), and nothing waits for its threads to stop, counts what it holds or checks after that
   it stayed stopped. Every way past a plain SIGSTOP that rounds 21-23 closed for the settled stop is open here: a
   process whose own POSIX timer sends it SIGCONT (round 22's A), threads inside long writes (round 21), helpers that
   hop past the /proc passes behind the uid wall (round 22's C: ``test_hoppers_run_on_through_a_plain_pause_behind_the
   _uid_wall``, 8 trials, hundreds of slices of work each while paused), armed timers of any kind; and on a GPU, device
   work the candidate queued before it was stopped (a spin kernel behind a sleep on a side stream, launched at its
   window's reply, runs through the oracle's reveal in *every* round: the rounds' smallest ``checks_us`` is no defence
   when each round is inflated). Taking an inflated checkpoint time (up to half the oracle's pass) off both passes
   magnifies every difference the clock sees: round 24's numbers, a kernel truly 1.15x faster credited 1.30x. Fix:
   time the checkpoints inside ``_alone(self.oracle, settled=True)`` (the reveal, or better a request of its own right
   after the oracle's window in the same held stop), on a GPU after the candidate's queue is idle (its worker asked to
   synchronise before the stop, and the oracle's event time checked against a second measurement).

C. **The interrupt rule denies an honest candidate on a busy host** (runners/interrupts.py ``storm``, CLOSED, unit: the
   candidate's cap is lifted to the machine's own rate before any candidate ran, ``Evaluator.ambient_irq``). With
   the candidate's share capped at 5 a ms, the oracle's allowance is at most 15 a ms whatever both sides saw: on a host
   whose own rate is 20 a ms (a busy NIC, another job's timers) during both sides' rounds alike, every case is credited
   no speedup. The H200 saw 1.5-3.3 a ms, so not met there yet. Below the cap a flood of 14 a ms costs the oracle about
   1.3-1.4x on this VM (19 us an interrupt: with the stand-in's tolerance of 0.5 a forged 2.0x could pass, a forged
   2.5x not), but A needs no interrupts at all. Fix: hold the oracle's rate to a reference of its own taken where the
   candidate cannot act (its rate over its samples, or a quiet window with the candidate's processes killed) rather
   than to a fixed cap: flag only ``mb > FLOOR + RATIO * max(reference, min(mc, CAP))``.

D. **Launch order from the correlation ids, all or nothing** (runners/timing.py ``_device_sequence``, CLOSED, unit: the
   links travel in the sequence and ``attributed_us`` matches only by them).
   The sequence is ordered by each event's link to its launch call only where *every* device event has one; a single
   device event without a link anywhere in the profile (e.g. a GPU-side annotation of a ``record_function`` range,
   where the profiler gives none: not verified on a GPU) puts the whole sequence back in start order, and round 24's
   D (a token ``_fwd_kernel`` queued on a side stream behind a sleep gets its namesake's 900 us) is back. Kernels
   replayed from one CUDA graph share its launch's link, and ties are broken by start: the same. Fix: carry the link
   into the sequence and have ``attributed_us`` leave a collision's name uncounted when any of its events lacks a link
   or two of them share one (never fall back to start order for them).

Read, not found: resume without ``kill(-1)`` leaves nothing of the candidate's stopped that it cannot continue itself
(a process stopped by the at-once stop was stopped, so the /proc passes find it; /proc/PID of a non-dumpable process is
still owned by its user); ``min(checks_b)`` taking a round near zero only lowers what is taken off (the candidate
cannot make the oracle's checkpoints faster). The samples' pause letting escaped helpers slow the oracle's samples
inflates only the claim, which a worker can forge anyway and the clock holds (``credit_cap``: the least of every
measurement's view, plus the tolerance); it does reach what runs under the same plain pause (B above, and the oracle's
autotuning in ``prepare_timing`` on a GPU: a disturbed oracle could pick a slower config for the bundle; not built).

Runs on the timed CPU stand-in (tests/test_judge_attacks.py ``_SHIM``, torch one thread a worker): one judge subprocess
for A's three evaluations (about 30 s on 2 cores), and unit tests of a few seconds.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import CHEATS
from test_judge_attacks_round4 import _timed_judge
from test_judge_attacks_round22 import _BEHIND_THE_WALL, _free_uid, _hopper, _progress
from test_judge_attacks_round24 import _profiled, _stub

from runners import interrupts as machine_irqs
from runners.armed import could_slow, held_timers
from runners.isolation import Isolation, release
from runners.kernel_share import attributed_us

CHEAT = "round25_hides_its_timers_in_aio_polls.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 38 ms on the stand-in (rounds 21-24)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = 2.5  # the forged claim, as rounds 21-24
AIO_RUNS = 2  # the worker cannot make an aio context (runners/syscalls.py): refused in every run, before any flood
X86 = pytest.mark.skipif(os.uname().machine != "x86_64", reason="the aio system calls' numbers on this architecture")


def _source(armed: str) -> str:
    text = (CHEATS / CHEAT).read_text()
    for key, value in {"ARMED": armed, "HIDE": "none", "CLAIM": str(CLAIM), "TIMERS": "60000", "LAG_MS": "5",
                       "BURSTS": "20"}.items():
        text = text.replace(f"@{key}@", value)
    return text


def _aio_room(want: int) -> bool:
    try:
        free = int(open("/proc/sys/fs/aio-max-nr").read()) - int(open("/proc/sys/fs/aio-nr").read())
    except (OSError, ValueError):
        return False
    return free >= want


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> list[dict]:
    if os.uname().machine != "x86_64" or not _aio_room(60_000):
        pytest.skip("needs x86_64 and 60000 aio events free (/proc/sys/fs/aio-max-nr)")
    return _timed_judge(rms_bundle, tmp_path_factory.mktemp("round25"),
                        [(_source("aio"), "verify", 51 + k, NUMBERS) for k in range(AIO_RUNS)], SYMBOLS,
                        one_thread=True)


def _credited(ev: dict) -> float | None:
    return max(s or 0.0 for s in ev["speedups"]) if ev["ok"] else None


def _seen(evs: list[dict]) -> str:
    return "; ".join(f"{ev['stage']} ok={ev['ok']} speedups {ev['speedups']} judge ratios {ev['judge_ratios']} "
                     f"walls (ms, oracle then candidate) {ev['window_ms']} irq/ms (oracle) "
                     f"{[[q.get('irq') for q in p or []] for p in ev['parts'] or []]} {ev['messages']} "
                     f"{ev['error'][:160]}" for ev in evs)


# ---- A. timers held by aio poll requests ----------------------------------------------------------------------------

def test_a_flood_held_by_aio_polls_earns_no_credit(runs):
    credited = [_credited(ev) for ev in runs]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}: {_seen(runs)}"


def test_a_flood_held_by_aio_polls_is_refused(runs):
    """Every run is refused before any flood is timed: the candidate's worker may not make an aio context at all
    (runners/syscalls.py; behind that, runners/armed.py refuses the contexts it can list)."""
    assert all(not ev["ok"] for ev in runs), _seen(runs)


# a stand-in for the candidate's worker: COUNT timerfds, each armed, watched by one aio poll request and closed, made
# on one core (due "at" seconds past twice the time their set-up is expected to take, paced by CAL more made first an
# hour out: each BURST-th of them at one instant, over SPAN seconds); it prints its pid and the monotonic time the
# flood starts, then waits. (A fixed 2.5 s from its start was spent by the set-up on a loaded CI machine: every timer
# then expired before the loop beside them.)
_AIO_HOLDER = r"""
import ctypes, os, struct, sys, time
count, core, at, bursts, span = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
CAL = 1000
libc = ctypes.CDLL(None, use_errno=True)


class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class Itimerspec(ctypes.Structure):
    _fields_ = [("interval", Timespec), ("value", Timespec)]


os.sched_setaffinity(0, {core})
ctx = ctypes.c_ulong(0)
assert libc.syscall(206, count + CAL, ctypes.byref(ctx)) == 0, ctypes.get_errno()  # io_setup
iocb = ctypes.create_string_buffer(64)
iocbp = ctypes.pointer(ctypes.c_void_p(ctypes.addressof(iocb)))
t0, value = time.clock_gettime(time.CLOCK_MONOTONIC), Itimerspec()
start = t0 + 3600.0  # the first CAL timers: an hour out, never due; their pace sets when the others are due
for k in range(-CAL, count):
    if k == 0:
        now = time.clock_gettime(time.CLOCK_MONOTONIC)
        start = now + 2.0 * (now - t0) * count / CAL + at
    fd = libc.timerfd_create(1, 0o2004000)
    assert fd >= 0, ctypes.get_errno()
    t = start + span * (k % bursts) / bursts
    value.value.sec, value.value.nsec = int(t), int((t % 1) * 1e9)
    assert libc.timerfd_settime(fd, 1, ctypes.byref(value), None) == 0
    struct.pack_into("<QIiHhIQQqQII", iocb, 0, k + CAL, 0, 0, 5, 0, fd, 1, 0, 0, 0, 0, 0)  # IOCB_CMD_POLL, POLLIN
    assert libc.syscall(209, ctx, 1, iocbp) == 1, ctypes.get_errno()  # io_submit
    os.close(fd)  # the poll request holds it now
os.write(1, b"%d %.6f\n" % (os.getpid(), start))
time.sleep(120)
"""


@contextlib.contextmanager
def _aio_holder(count: int, core: int, at: float, bursts: int = 1, span: float = 0.0):
    proc = subprocess.Popen([sys.executable, "-c", _AIO_HOLDER, str(count), str(core), str(at), str(bursts),
                             str(span)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = proc.stdout.readline().split()
        assert line, proc.stderr.read().decode(errors="replace")[-2000:]
        yield int(line[0]), float(line[1])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@X86
def test_timers_held_by_aio_polls_are_refused():
    if not _aio_room(4000):
        pytest.skip("no room for 4000 aio events")
    with _aio_holder(3000, 0, 3600.0) as (pid, _):
        fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        assert "anon_inode:[timerfd]" not in fds  # the set-up: none of them in its table
        worker = _stub(pid)
        worker.pause()
        try:
            assert not worker.still_running()
            before = worker.cpu_times()
            seen = could_slow(before), held_timers({str(pid)})
        finally:
            worker.resume()
    assert seen[0], f"could_slow said nothing of 3000 armed timers held by aio polls: {seen[1]}"


def _loop_rate(seconds: float) -> float:
    t, n = time.perf_counter(), 0
    while time.perf_counter() - t < seconds:
        for _ in range(300):
            pass
        n += 1
    return n / (time.perf_counter() - t)


@X86
def test_timers_in_aio_polls_slow_work_beside_them_unflagged():
    """The mechanism of A's credit: 40000 timers held by aio polls, due in 8 bursts over 60 ms on the core this test's
    loop runs on, their holder stopped as the judge stops a candidate: the loop is slower over those 80 ms by far more
    than the clock's tolerance while the machine's interrupts a ms stay under what ``storm`` flags even against a
    candidate that took none of its own."""
    if not _aio_room(41_000):
        pytest.skip("no room for 41000 aio events")
    core = sorted(os.sched_getaffinity(0))[0]
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        with _aio_holder(40_000, core, 0.5, bursts=8, span=0.06) as (pid, start):
            worker = _stub(pid)
            worker.pause()
            try:
                quiet = _loop_rate(0.08)
                while time.clock_gettime(time.CLOCK_MONOTONIC) < start - 0.005:
                    time.sleep(0.001)
                irq, t = machine_irqs.total(), time.perf_counter()
                loud = _loop_rate(0.08)
                rate = machine_irqs.per_ms(irq, machine_irqs.total(), (time.perf_counter() - t) * 1e6)
                quiet = max(quiet, _loop_rate(0.08))
            finally:
                worker.resume()
    finally:
        os.sched_setaffinity(0, mask)
    assert quiet / loud >= 1.3, (quiet, loud, rate)  # 1.5-3.4x on this VM
    assert rate is not None and not machine_irqs.storm([rate] * 3, [0.0] * 3), (quiet, loud, rate)


# ---- B. the checkpoints' time, under a stop that is not held --------------------------------------------------------

class _Asked(Exception):
    pass


class _FakeWorker:
    def __init__(self, role: str, judge):
        self.role, self.judge = role, judge

    def request(self, op, **fields):
        if op == "window":
            return {"ok": True, "pass_us": 1000.0, "commitment": 1, "lead_us": 0.0, "commit_us": 0.0}
        if op == "reveal" and self.role == "oracle":
            raise _Asked(("time_checks" in fields and fields["time_checks"], list(self.judge.held)))
        return {"ok": True}


def _probe_judge():
    """``runners.judge_clock.TimingSteps`` with fake workers and its ``_alone`` recording which stop holds what."""
    from runners.judge_clock import TimingSteps
    from runners.protocol import Protocol

    class Probe(TimingSteps):
        @contextlib.contextmanager
        def _alone(self, worker, settled: bool = False):
            self.held.append((worker.role, settled))
            try:
                yield
            finally:
                self.held.pop()

    judge = Probe.__new__(Probe)
    judge.p, judge.held, judge.spent, judge.bystanders, judge.device = Protocol(), [], {}, [], "cpu"
    judge.oracle, judge.candidate = _FakeWorker("oracle", judge), _FakeWorker("candidate", judge)
    return judge


def test_the_oracles_checkpoints_are_timed_with_the_candidate_held():
    judge = _probe_judge()
    with pytest.raises(_Asked) as asked:
        judge._clock_rounds(None, 0, 1, 4, {}, 2, None, 0)
    timed, held = asked.value.args[0]
    assert not timed or ("oracle", True) in held, f"the oracle's reveal timing its checkpoints ran under {held}"


@pytest.mark.skipif(os.geteuid() != 0, reason="running processes as another user needs root")
def test_hoppers_run_on_through_a_plain_pause_behind_the_uid_wall():
    """The set-up of B behind the uid wall (round 22's C, as the judge now pauses for its samples and the oracle's
    reveal): ``pause`` alone, no ``still_running``, so no ``kill(-1)`` as the user; helpers hopping from process to
    process faster than its two passes over /proc go on working while the judge would time the oracle."""
    uid = _free_uid()
    handle, flag = tempfile.mkstemp(prefix="ks-round25-hop-", dir="/dev/shm")
    os.write(handle, b"1")
    os.close(handle)
    os.chmod(flag, 0o644)
    proc = subprocess.Popen([sys.executable, "-c", _BEHIND_THE_WALL, str(uid), "12", flag, _hopper()],
                            stdout=subprocess.PIPE)
    fd = proc.stdout.fileno()
    seen = []
    try:
        worker_pid = int(proc.stdout.readline().split()[1])
        os.set_blocking(fd, False)
        _progress(fd, 0.3)
        worker = _stub(worker_pid)
        worker.uid = uid
        for _ in range(6):
            worker.pause()
            _progress(fd, 0.02)
            seen.append(_progress(fd, 0.2))  # slices of work while the oracle's checkpoints would be timed
            worker.resume()
            _progress(fd, 0.05)
    finally:
        Isolation.kill_leftovers(uid)
        time.sleep(0.1)
        proc.kill()
        proc.wait()
        os.unlink(flag)
        release(uid)
    assert max(seen) > 20, f"slices of work while paused: {seen}"


# ---- C. the interrupt rule on a busy host ---------------------------------------------------------------------------

def test_a_host_busy_alike_for_both_sides_is_no_storm():
    """The machine's own rate before any candidate ran (the evaluator's ``ambient_irq``) lifts the candidate's cap."""
    assert not machine_irqs.storm([20.0, 20.5, 19.5], [20.0, 19.5, 20.5], 20.0)
    assert machine_irqs.storm([20.0, 20.5, 19.5], [20.0, 19.5, 20.5], 1.0)  # a quiet machine made busy: flagged


def test_a_flood_of_twice_the_cap_is_flagged_whatever_the_candidate_took():
    most = machine_irqs.FLOOR_PER_MS + machine_irqs.RATIO * machine_irqs.CANDIDATE_CAP_PER_MS
    assert machine_irqs.storm([most + 1.0] * 3, [100.0] * 3) and not machine_irqs.storm([most - 1.0] * 3, [100.0] * 3)


# ---- D. launch order from the correlation ids, all or nothing --------------------------------------------------------

_LAUNCHES = ["cand.kernels:_fwd_kernel", "vendor.attention:_fwd_kernel"]  # made in this order
_OWN = ["cand.kernels:_fwd_kernel"]


def test_one_unlinked_device_event_does_not_give_the_token_its_namesakes_time():
    from runners.timing import _device_sequence

    sequence = _device_sequence(_profiled(("_fwd_kernel", 950.0, 4.0, 101), ("_fwd_kernel", 10.0, 900.0, 102),
                                          ("annotation", 5.0, 960.0, 0)))
    assert attributed_us(sequence, _LAUNCHES, _OWN) <= 4.0 + 1e-6, sequence


def test_kernels_of_one_graph_launch_are_not_matched_in_start_order():
    from runners.timing import _device_sequence

    sequence = _device_sequence(_profiled(("_fwd_kernel", 950.0, 4.0, 101), ("_fwd_kernel", 10.0, 900.0, 101)))
    assert attributed_us(sequence, _LAUNCHES, _OWN) <= 4.0 + 1e-6, sequence


def test_linked_events_on_two_streams_are_matched_in_launch_order():
    """Control: every event linked to a launch of its own, the token gets its own 4 us (round 24's D, closed)."""
    from runners.timing import _device_sequence

    sequence = _device_sequence(_profiled(("_fwd_kernel", 950.0, 4.0, 101), ("_fwd_kernel", 10.0, 900.0, 102)))
    assert attributed_us(sequence, _LAUNCHES, _OWN) == pytest.approx(4.0)
