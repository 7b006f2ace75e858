"""Attacks on the judge, twenty-third round: the candidate held stopped while the oracle is timed (round 22's fix).

Before each oracle round of its clock the judge SIGSTOPs the candidate, waits until every thread of its group (and of
its user, behind the uid wall) shows T, snapshots each thread's CPU time and count of runs on a CPU (schedstat), and
after the round refuses a candidate any of whose threads ran, was born or ended (runners/stopped.py ``cpu_times``,
``ran_since``; runners/alone.py ``_alone(settled=True)``). That holds the candidate's *threads*. It does not hold
what the kernel does for the candidate on its own.

A. **Timer interrupts on the oracle's cores** (``tests/cheats/round23_floods_the_oracles_cores_with_timer_interrupts.py``,
   CLOSED while this round was written: runners/armed.py). Before each reply after which the oracle is timed, the
   worker arms tens of thousands of one-shot POSIX timers (``timer_create``/``timer_settime(TIMER_ABSTIME)``, SIGURG,
   ignored by default: the signal is dropped, nothing is woken), expiries spread over the next few hundred ms, half
   armed from each core (an hrtimer fires on the core whose base holds it); before the round where it goes first, at
   its warm-up, for just after its own window. Each expiry is a timer interrupt on that core, its hrtimer callback and
   the signal's generation, all in interrupt context and charged to whatever runs there: the oracle. No candidate
   thread is put on a CPU, born or ended, and none of its CPU time grows: ``ran_since`` was empty every time. In this
   Firecracker guest an interrupt costs ~10-25 us (timer interrupts and LAPIC re-programming are VM exits): 18-24 k
   expiries over 300-500 ms made a busy loop pinned beside a stopped stand-in 2.7-9x slower (e.g. 409 ms against 145,
   ~18 900 more LOC interrupts). At the judge (a copy of the baseline forging 2.5x, 24 k timers): credited 2.21x and
   2.89x in 2 of 5 runs, the others quarantined where one counted oracle round escaped the flood (oracle windows 120-
   220 ms against the candidate's 35-80 where it landed). On bare metal an interrupt costs ~1-2 us, and a user may hold
   96 k POSIX timers (RLIMIT_SIGPENDING, per user), 20 k timerfds a process (RLIMIT_NOFILE) in as many processes as it
   likes, and io_uring timeouts: the same at more timers. On a GPU the oracle's host side is slowed (at decode sizes its
   passes are launch-bound). A cgroup freezer would not help: a frozen task's timers fire all the same. Now
   ``could_slow`` (runners/armed.py) counts the stopped candidate's POSIX timers (/proc/PID/timers), armed timerfds
   (/proc/PID/fdinfo) and io_uring instances before the oracle's round and refuses more than a few: refused at
   ``timing`` ("could slow the baseline while it is stopped").

A'. **The same timers in flight** (``tests/cheats/round23_keeps_its_timers_in_flight.py``, credit CLOSED by
   runners/interrupts.py after this round was written: where the oracle's rounds saw more than FLOOR_PER_MS plus twice
   the candidate's interrupts a ms, the clock credits no speedup; not refused, strict xfail). ``could_slow`` reads
   the candidate's tables of open files; a file sent over a unix socket (SCM_RIGHTS) and closed by its sender is in no
   process's table, only in the socket's queue (a user may keep its RLIMIT_NOFILE of files in flight; root, without
   limit). 18 k timerfds, armed, posted 250 a message into a socket pair of the worker's and closed: /proc/PID/fd shows
   two sockets, and the timers fire all the same (a timerfd's expiry needs no reader). To re-arm, the worker takes each
   message back, re-arms its 250 and posts them again. Stand-in: work beside it 2.4-3.7x slower, ``still_running``,
   ``ran_since`` and ``could_slow`` all empty. At the judge: never refused for it; credited 2.79x and 2.73x of a forged
   2.5x in 2 of 5 runs (quarantined in the others as A's). The same holds for an io_uring instance in flight (its
   timeouts are hrtimers too) and for kernel timers no listing shows (a TCP socket's pacing and retransmission timers,
   with their softirq work). Fix, for all of them: measure what the kernel did on the cores, not what the candidate
   holds: count the interrupts (/proc/interrupts LOC and the rest, /proc/softirqs HRTIMER, NET_RX, TIMER) over each
   side's timed round and refuse or measure again when the oracle's round saw markedly more per ms than the
   candidate's own; or hold the oracle's passes to passes of its own timed before the candidate's worker existed (what
   a stopped candidate does to the oracle shows as an oracle slower than itself, whatever the mechanism); the full hold
   is timing the oracle with the candidate's processes ended (every timer, socket and ring dies with them).

B. **io_uring's kernel threads** (mechanism only, CLOSED): an SQPOLL ring's ``iou-sqp-PID`` thread is a thread of the
   candidate's process, listed in /proc/PID/task, and enters the group stop with it (T): the judge's wait and snapshot
   hold it (io-wq workers are the same kind of thread, PF_IO_WORKER, and stop the same way). (``could_slow`` now refuses
   any io_uring instance in the table anyway: its timeouts fire while it is stopped.)

Read, not found: threads hidden from the scans by namespaces (a process in a PID or user namespace of its own shows
in the judge's /proc under its global pid, its group's number and its owner's uid; its init accepts SIGSTOP from an
ancestor namespace); /proc/PID owned by root for a non-dumpable process (the directory itself keeps the euid; only the
files inside change owner); a new thread or a fork racing the stop (a fork with a group stop pending is restarted);
false refusals of an honest worker (a stopped thread's run count only grows when it runs; a thread shown T a moment
before it leaves the CPU adds time, not a run). To watch in ``could_slow``: MAX_PROCESSES 64 against torch.compile's
pool (``compile_threads`` is min(32, cores) workers on a many-core GPU host, besides the worker and its compilers).
Not tried here (they cost other engineers' runs on this shared machine): dirty page cache written back by the
flushers during the oracle's round, memory pressure (no swap here:
only the oracle's file pages could be evicted), both kernel work the same way A is; and, as the judge's own user only,
the candidate setting the oracle's priority or affinity (``setpriority``/``sched_setaffinity`` need only the same
owner, not a dumpable target).

Runs on the timed CPU stand-in (tests/test_judge_attacks.py ``_SHIM``, torch one thread a worker), one judge
subprocess for every evaluation of the module (A once, A' twice, A's forged claim alone).
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

from runners.processes import WorkerProcess
from runners import interrupts as machine_irqs
from runners.armed import could_slow
from runners.stopped import ran_since

FLOOD = "round23_floods_the_oracles_cores_with_timer_interrupts.py"
IN_FLIGHT = "round23_keeps_its_timers_in_flight.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 35 ms on the stand-in (rounds 21 and 22)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = 2.5  # the forged claim, as rounds 21 and 22
TIMERS, SPAN_MS = "24000", "300"  # POSIX timers (a user may hold 96k here: RLIMIT_SIGPENDING)
FLIGHT_TIMERS = "18000"  # timerfds in flight (a user may have its RLIMIT_NOFILE in flight: 20k here)
ARMED_RUNS = 2


def _source(name: str, **marks: str) -> str:
    text = (CHEATS / name).read_text()
    for key, value in marks.items():
        text = text.replace(f"@{key}@", value)
    return text


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> dict:
    flood = _source(FLOOD, ARMED="armed", CLAIM=str(CLAIM), TIMERS=TIMERS, SPAN_MS=SPAN_MS)
    flight = _source(IN_FLIGHT, ARMED="armed", CLAIM=str(CLAIM), TIMERS=FLIGHT_TIMERS, SPAN_MS=SPAN_MS)
    alone = _source(FLOOD, ARMED="no", CLAIM=str(CLAIM), TIMERS=TIMERS, SPAN_MS=SPAN_MS)
    plan = [(flood, 5), *[(flight, 6 + k) for k in range(ARMED_RUNS)], (alone, 9)]
    results = _timed_judge(rms_bundle, tmp_path_factory.mktemp("round23"),
                           [(source, "verify", seed, NUMBERS) for source, seed in plan], SYMBOLS, one_thread=True)
    return {"flood": results[0], "flight": results[1:1 + ARMED_RUNS], "alone": results[1 + ARMED_RUNS]}


def _credited(ev: dict) -> float | None:
    return max(s or 0.0 for s in ev["speedups"]) if ev["ok"] else None


def _seen(evs: list[dict]) -> str:
    return "; ".join(f"{ev['stage']} ok={ev['ok']} speedups {ev['speedups']} judge ratios {ev['judge_ratios']} "
                     f"walls (ms, oracle then candidate) {ev['window_ms']} {ev['error'][:160]}" for ev in evs)


def _stub(pid: int, uid: int | None = None) -> WorkerProcess:
    """The judge's own handle on a worker (``pause``, ``still_running``, ``cpu_times``, ``resume``) around a process of
    the test's."""
    worker = WorkerProcess.__new__(WorkerProcess)
    worker.proc, worker.uid = types.SimpleNamespace(pid=pid), uid
    return worker


# ---- A. timer interrupts on the oracle's cores ----------------------------------------------------------------------

def test_a_worker_whose_posix_timers_fire_through_the_oracles_round_is_refused(runs):
    """(Was a hole: credited 2.21x and 2.89x of a forged 2.5x in 2 runs of 5 tried before runners/armed.py; the others
    were quarantined where one counted oracle round escaped the flood.) The judge now counts the stopped candidate's
    POSIX timers before the oracle's round and refuses it."""
    ev = runs["flood"]
    assert not ev["ok"] and "could slow the baseline while it is stopped" in ev["error"], _seen([ev])


def test_a_worker_whose_timers_are_in_flight_earns_no_credit(runs):
    """Closed for the credit: where the oracle's rounds saw markedly more interrupts than the candidate's, the clock
    credits no speedup (runners/interrupts.py; the mechanism: ``test_timerfds_kept_in_flight_...`` below)."""
    evs = runs["flight"]
    credited = [_credited(ev) for ev in evs]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}: {_seen(evs)}"


@pytest.mark.xfail(strict=True, reason=(
    "runners/armed.py counts the POSIX timers, armed timerfds and io_uring instances in a stopped candidate's "
    "/proc/PID/timers and /proc/PID/fd; timerfds posted over a unix socket (SCM_RIGHTS) and closed are in no "
    "process's table of open files, and fire all the same through the oracle's round: credited 2.79x and 2.73x of a "
    "forged 2.5x in 2 of 5 runs before runners/interrupts.py, which now credits no speedup where the oracle's rounds "
    "saw markedly more interrupts than the candidate's, but refuses nothing: the interrupts are the machine's, not "
    "attributed to the candidate. Fix: attribute them (per-core counts on the oracle's pinned cores against an idle "
    "reference, measured again with the candidate's processes ended) and refuse"))
def test_a_worker_whose_timers_are_in_flight_is_refused_for_them(runs):
    """The judge refuses the candidate for what it does while stopped (not merely quarantines the forged claim on its
    clock's noise, which it does in some runs and not in others)."""
    evs = runs["flight"]
    credited = [_credited(ev) for ev in evs]
    assert all(not ev["ok"] and "claimed speedup" not in ev["error"] for ev in evs), \
        f"credited {credited}: {_seen(evs)}"


def test_the_forged_claim_alone_is_quarantined(runs):
    """A's control: the same worker without its timers (a copy of the baseline claiming 2.5x) is not credited."""
    ev = runs["alone"]
    assert not ev["ok"] or _credited(ev) <= 1.25, _seen([ev])


# a stopped stand-in for the candidate's worker: N one-shot timers armed half from each core to expire from DELAY_MS on
# over SPAN_MS, then asleep (the judge stops it): POSIX timers (SIGURG, ignored), or timerfds posted over a unix socket
# (SCM_RIGHTS) and closed, in no process's table of open files ("flight")
_TIMED = r"""
import array, ctypes, os, resource, signal, socket, sys, time
n, delay, span, kind = int(sys.argv[1]), float(sys.argv[2]) / 1000, float(sys.argv[3]) / 1000, sys.argv[4]
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
libc = ctypes.CDLL(None, use_errno=True)


class Sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_int * 12)]


class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class Itimerspec(ctypes.Structure):
    _fields_ = [("interval", Timespec), ("value", Timespec)]


ids = []
for _ in range(n):
    if kind == "flight":
        fd = libc.timerfd_create(1, 0o2004000)
        assert fd >= 0, ctypes.get_errno()
        ids.append(fd)
    else:
        timer = ctypes.c_void_p()
        assert libc.timer_create(1, ctypes.byref(Sigevent(None, int(signal.SIGURG), 0)), ctypes.byref(timer)) == 0
        ids.append(timer)
settime = libc.timerfd_settime if kind == "flight" else libc.timer_settime
os.write(1, b"made\n")
sys.stdin.readline()
cpus = sorted(os.sched_getaffinity(0))
start = time.clock_gettime(time.CLOCK_MONOTONIC) + delay
value = Itimerspec()
for c in cpus:
    os.sched_setaffinity(0, {c})
    for k in range(cpus.index(c), n, len(cpus)):
        t = start + span * k / n
        value.value.sec, value.value.nsec = int(t), int((t % 1) * 1e9)
        settime(ids[k], 1, ctypes.byref(value), None)
if kind == "flight":
    keep, post = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for i in range(0, n, 250):
        post.sendmsg([b"t"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", ids[i:i + 250]))])
    for fd in ids:
        os.close(fd)
os.write(1, b"armed\n")
time.sleep(120)
"""

UNIT_TIMERS, UNIT_DELAY_MS, UNIT_SPAN_MS = 18000, 150, 500


def _timer_interrupts() -> int:
    with open("/proc/interrupts") as f:
        for line in f:
            if line.strip().startswith("LOC:"):
                return sum(int(x) for x in line.split()[1:] if x.isdigit())
    return 0


def _busy() -> tuple[float, float]:
    """A fixed piece of work on core 0, as the oracle's pass: its wall and its thread's CPU time (ms)."""
    t, c, x = time.perf_counter(), time.thread_time(), 0
    for i in range(2_500_000):
        x += i
    return (time.perf_counter() - t) * 1000, (time.thread_time() - c) * 1000


def _trial(timers: int, kind: str = "posix") -> tuple[list, list, float, int]:
    """A stopped stand-in holding ``timers`` armed timers while the test does the oracle's work on core 0: what the
    judge sees (threads left running, ``ran_since``) and what the work cost."""
    proc = subprocess.Popen([sys.executable, "-c", _TIMED, str(timers), str(UNIT_DELAY_MS), str(UNIT_SPAN_MS), kind],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline() == b"made\n"
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"armed\n"
        worker = _stub(proc.pid)
        worker.pause()
        left = worker.still_running()
        before = worker.cpu_times()
        deadline = time.monotonic() + UNIT_DELAY_MS / 1000
        while timers and time.monotonic() < deadline:  # until the expiries have begun
            interrupts = _timer_interrupts()
            time.sleep(0.005)
            if _timer_interrupts() - interrupts > 50:
                break
        interrupts, machine = _timer_interrupts(), machine_irqs.total()
        wall, cpu = _busy()
        interrupts = _timer_interrupts() - interrupts
        rate = machine_irqs.per_ms(machine, machine_irqs.total(), wall * 1000)  # what the judge's clock reads
        caught = ran_since(before, worker.cpu_times()) + ([could_slow(before)] if could_slow(before) else [])
        worker.resume()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    RATES[kind if timers else "control"].append(rate)
    return left, caught, cpu, interrupts


RATES: dict = {"control": [], "posix": [], "flight": []}  # the machine's interrupts a ms over each trial's work


def _flood(kind: str) -> list:
    """Two trials without timers and three with: (threads left running, what the judge caught, the work's CPU time
    against the control's, the interrupts during the work)."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {sorted(old)[0]})
    try:
        control = [_trial(0, kind) for _ in range(2)]
        flood = [_trial(UNIT_TIMERS, kind) for _ in range(3)]
    finally:
        os.sched_setaffinity(0, old)
    base = min(cpu for _, _, cpu, _ in control)
    return [(left, caught, round(cpu / base, 2), n) for left, caught, cpu, n in flood]


def test_posix_timers_armed_before_the_stop_are_refused():
    """(Was a hole: the judge saw nothing, ``ran_since`` empty, while the stopped stand-in's timers made the work on the
    core 3-9x slower.) ``could_slow`` (runners/armed.py) now counts them before the oracle's round."""
    seen = _flood("posix")
    assert all(left or caught for left, caught, _, _ in seen), f"(still running, caught, CPU x, interrupts): {seen}"
    assert all(any("POSIX timer" in c for c in caught) for _, caught, _, _ in seen), seen


def test_timerfds_kept_in_flight_slow_the_oracle_and_the_judge_sees_it():
    seen = _flood("flight")
    # the set-up itself: the timers fired as interrupts (3.5-4.4 k of 18 k in a CI simulation), and the work took longer
    assert all(n > UNIT_TIMERS / 10 for *_, n in seen), seen  # how many land inside the work depends on the load
    assert max(ratio for _, _, ratio, _ in seen) > 1.3, seen
    # nothing the judge reads of the candidate shows them (a thread still running, one that ran, timers it holds) ...
    assert not any(left or caught for left, caught, _, _ in seen), seen
    # ... but the machine's interrupts do (runners/interrupts.py): the clock credits no speedup where the oracle's
    # rounds saw markedly more than the candidate's own
    control = RATES["control"][-2:]
    assert all(machine_irqs.storm([r] * 3, control) for r in RATES["flight"][-3:]), (RATES, seen)
    assert not machine_irqs.storm(control, control[::-1]), RATES


# ---- B. io_uring's kernel threads -----------------------------------------------------------------------------------

_SQPOLL = r"""
import ctypes, os, sys, time
params = (ctypes.c_uint32 * 30)()
params[2], params[4] = 2, 1000  # IORING_SETUP_SQPOLL, sq_thread_idle 1 s
fd = ctypes.CDLL(None, use_errno=True).syscall(425, 8, params)  # io_uring_setup
os.write(1, b"ring %d\n" % fd)
time.sleep(120)
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="io_uring_setup's number on this architecture")
def test_an_io_uring_sqpoll_thread_is_held_stopped_with_its_process():
    proc = subprocess.Popen([sys.executable, "-c", _SQPOLL], stdout=subprocess.PIPE, start_new_session=True)
    try:
        line = proc.stdout.readline()
        if int(line.split()[1]) < 0:
            pytest.skip("no io_uring here")
        names = []
        for _ in range(100):
            names = [open(f"/proc/{proc.pid}/task/{t}/comm").read().strip() for t in os.listdir(f"/proc/{proc.pid}/task")]
            if any(n.startswith("iou-sqp") for n in names):
                break
            time.sleep(0.01)
        assert any(n.startswith("iou-sqp") for n in names), names  # the set-up itself
        worker = _stub(proc.pid)
        seen = []
        for _ in range(3):
            worker.pause()
            left = worker.still_running(1.0)
            before = worker.cpu_times()
            time.sleep(0.1)
            seen.append((left, ran_since(before, worker.cpu_times()), len(before)))
            worker.resume()
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert all(not left and not ran and n == 2 for left, ran, n in seen), seen
