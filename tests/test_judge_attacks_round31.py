"""Attacks on the judge, thirty-first round: round 30's open-files limit (runners/processes.py
``CANDIDATE_OPEN_FILES``), and what else a stopped candidate can make the kernel do on the oracle's cores.

A. **A queue of pending signals walked in the timer's interrupt, from a process held in a ptrace stop** (CLOSED;
   found open). A stop signal sent to a process flushes SIGCONT from its queues, and SIGCONT flushes the stop signals
   (``prepare_signal``); where one is pending, ``flush_sigqueue_mask`` walks the whole queue. A process may keep as
   many real-time signals queued as its user's ``RLIMIT_SIGPENDING`` allows (blocked, they stay queued), and the
   candidate's worker inherits the judge's (96362 on this VM; the default grows with memory, about 500000 on a host of
   128 GiB): one walk of 90000 took 1-2 ms here, in the sender's context. A POSIX timer may send SIGSTOP or SIGCONT,
   from its hrtimer interrupt on the core that armed it. SIGCONT wakes a plain stopped process (which
   ``stopped.ran_since`` would then see run, round 22), but not a *traced* one: ``prepare_signal`` wakes only
   ``__TASK_STOPPED``, and a task in a ptrace stop stays there. So the holder, a child of the worker, asks to be traced
   (``PTRACE_TRACEME``) and stops itself (a signal-delivery stop, 't', which ``stopped._DONE`` counts as stopped); its
   16 timers (``armed.MAX_TIMERS``), SIGCONT and SIGSTOP in turn, each find the other pending, and each expiry walks the
   queue. Measured on this VM (6.18, 2 cores), the holder started as the candidate's uid under ``_child_setup`` (the
   filter, 1024 open files, ``RLIMIT_NPROC``) and stopped and checked as the judge stops a candidate: 16 expiries over
   120 ms cost a loop on their core 24-32 ms (the same timers on an empty queue: nothing above the loop's noise), every
   check clean: ``still_running`` and ``ran_since`` empty, ``could_slow`` empty (16 POSIX timers, two processes),
   0.3-0.4 interrupts a ms. None of ``ptrace``, ``timer_create``, ``kill`` or ``rt_sigprocmask`` is refused by the
   filter. Unlike round 29's threads, the judge's own scans are not taxed (three threads), so the aim is sharp.
   End to end (``tests/cheats/round31_walks_its_signal_queue_from_a_ptrace_stop.py``: round 29's timing, the worker the
   holder's tracer, re-arming it between the oracle's windows, never inside its own timed window), a copy of the
   baseline claiming 2.0x: the counted oracle window where the candidate goes first was slowed by 17-34 ms (57-69 ms
   against 34-39) in every run; the one where the oracle goes first is aimed from the candidate's reveal across the
   judge's noisy look at it, and was hit in 2 runs of 8, which were credited 2.01x and 2.05x (the others quarantined,
   the clock taking the worse counted window). With the standard 7 rounds (6 counted, the upper median) four hits are
   needed; a sharper aim for the oracle-first rounds (the judge's removal of its outbox files, which an inotify watch on
   its own folder sees, comes right before the oracle's round) was not built.
   Before the fix, end to end, every run slowed the counted oracle window where the candidate goes first by 17-34 ms,
   and a copy of the baseline claiming 2.0x was credited 2.01x and 2.05x in 2 runs of about 8.
   Fixed in three parts: (1) runners/processes.py ``_child_setup``: a candidate starts with ``RLIMIT_SIGPENDING`` at
   ``CANDIDATE_PENDING_SIGNALS`` (256; behind the uid wall the count is its user's, every process of it; a ``kill``
   past it sets the signal's bit and queues nothing); (2) runners/syscalls.py answers ``ptrace`` with EPERM, so no
   candidate thread sits in a traced stop; (3) for a kernel without seccomp, the held stop (runners/armed.py
   ``too_many``) refuses a thread in a ptrace stop ('t') and a user's queue (``SigQ``) over ``MAX_QUEUED_SIGNALS``.

B. **Round 30's open-files limit** (CLOSED, passing tests). A worker started as the judge starts a candidate behind the
   uid wall cannot raise its soft or hard ``RLIMIT_NOFILE`` (neither ``setrlimit`` nor ``prlimit`` on itself), and the
   files in flight its *user* may keep are bounded across several of its processes sending at once (the kernel's check
   reads the user's count against each sender's limit): four senders, 20000 asked, 1250 in flight in all (750,
   500, 0, 0), as round 30's one. Read, not found: no descriptor but the two pipes reaches the worker
   (``close_fds``, ``pass_fds``); files in flight over a socket of another user's process still count against the
   sender's user; the warm spare runs under the other uid.

Runtime: about 25-30 s (mechanism runs of a second or so each, two end-to-end runs and a control on the stand-in).
"""
from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import CHEATS
from test_judge_attacks_round24 import _credited, _stub
from test_judge_attacks_round28 import LINUX_X86, _seen
from test_judge_attacks_round30 import UID, _gaps, _needs_root

from runners import interrupts as machine_irqs
from runners.armed import MAX_TIMERS, could_slow, held_timers
from runners.stopped import ran_since

CHEAT = "round31_walks_its_signal_queue_from_a_ptrace_stop.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 38-41 ms on the stand-in (rounds 21-29)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = float(os.environ.get("KS_ROUND31_CLAIM", "2.0"))
QUEUED = int(os.environ.get("KS_ROUND31_QUEUED", "90000"))
RUNS = int(os.environ.get("KS_ROUND31_RUNS", "2"))  # a run may miss one counted window
SIGNAL_BOUND = 1024  # the most signals a candidate's user should be able to keep queued (the fix proposes 256)

# A stand-in for the candidate's worker: a tracer (this process) and its child, the holder, which blocks SIGCONT and a
# real-time signal, queues N of it on itself, makes TIMERS POSIX timers (SIGCONT and SIGSTOP in turn) armed DELAY s
# ahead over SPAN s on CORE, asks to be traced and stops itself. Prints the holder's pid, how many it queued, whether
# it is traced and the first expiry (CLOCK_MONOTONIC).
_WALK = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
class TS(ctypes.Structure): _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
class ITS(ctypes.Structure): _fields_ = [("interval", TS), ("value", TS)]
class SEV(ctypes.Structure):
    _fields_ = [("value", ctypes.c_long), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("pad", ctypes.c_char * 48)]
n, timers, delay, span, core = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
os.sched_setaffinity(0, {core})
rt = signal.SIGRTMIN + 2
r, w = os.pipe()
if os.fork() == 0:
    signal.pthread_sigmask(signal.SIG_BLOCK, {rt, signal.SIGCONT})
    queued = 0
    for _ in range(n):
        try:
            os.kill(os.getpid(), rt)
            queued += 1
        except OSError:
            break
    ids = []
    for k in range(timers):
        t = ctypes.c_void_p()
        sig = signal.SIGCONT if k % 2 == 0 else signal.SIGSTOP
        if libc.timer_create(1, ctypes.byref(SEV(0, sig, 0)), ctypes.byref(t)) != 0:
            break  # EAGAIN: each timer takes a place in the user's queue of pending signals (RLIMIT_SIGPENDING)
        ids.append(t)
    first = time.clock_gettime(time.CLOCK_MONOTONIC) + delay
    for k, t in enumerate(ids):
        at = first + span * k / max(1, len(ids) - 1)
        assert libc.timer_settime(t, 1, ctypes.byref(ITS(TS(0, 0), TS(int(at), int((at % 1) * 1e9)))), None) == 0
    traced = libc.syscall(101, 0, 0, 0, 0) == 0  # PTRACE_TRACEME
    os.write(w, b"%d %d %d %.6f\n" % (os.getpid(), queued, traced, first))
    os.kill(os.getpid(), signal.SIGSTOP)  # a signal-delivery stop when traced: held there, 't'
    os._exit(0)
os.close(w)
os.write(1, os.read(r, 200) or b"holder failed\n")
while True:  # its stops reported, and its end reaped here (a zombie's queue still counts against the user's limit)
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break
time.sleep(120)
"""


def _stopped_walk(queued: int, uid: int | None, preexec=None, timers: int = MAX_TIMERS, span: float = 0.12) -> dict:
    """The stand-in started (as ``uid`` where given, under ``preexec``), stopped and checked as the judge stops a
    candidate before the oracle's round; then a busy loop on its core through the expiries: its gaps over 0.2 ms."""
    from runners import syscalls

    core = sorted(os.sched_getaffinity(0))[0]
    python = shutil.which("python3", path="/usr/bin:/bin") if uid is not None else sys.executable
    kw = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
    proc = subprocess.Popen([python, "-c", _WALK, str(queued), str(timers), "1.0", str(span), str(core)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, cwd="/",
                            preexec_fn=preexec or syscalls.install, **kw)
    mask = os.sched_getaffinity(0)
    try:
        line = proc.stdout.readline().split()
        assert len(line) == 4, (line, proc.stderr.read().decode(errors="replace")[-2000:])
        holder, made, traced, first = int(line[0]), int(line[1]), line[2] == b"1", float(line[3])
        time.sleep(0.05)  # the holder reaches its stop
        os.sched_setaffinity(0, {core})
        worker = _stub(proc.pid)
        worker.pause()
        try:
            left = worker.still_running()
            before = worker.cpu_times()
            pids = {pid for pid, _, _ in before}
            held, slow = held_timers(pids), could_slow(before)
            states = sorted(state.decode() for state, _, _ in before.values())
            wait = first - 0.03 - time.clock_gettime(time.CLOCK_MONOTONIC)
            assert wait > 0, "the judge's scans took longer than the stand-in's delay"
            time.sleep(wait)
            irq, t = machine_irqs.total(), time.perf_counter()
            gaps = _gaps(span + 0.08)
            rate = machine_irqs.per_ms(irq, machine_irqs.total(), (time.perf_counter() - t) * 1e6)
            ran = ran_since(before, worker.cpu_times())
        finally:
            worker.resume()
    finally:
        os.sched_setaffinity(0, mask)
        _end(proc, locals().get("holder"))
    return {"queued": made, "traced": traced, "states": states, "lost_ms": round(sum(gaps) * 1e3, 2),
            "top_gaps_ms": [round(g * 1e3, 2) for g in sorted(gaps, reverse=True)[:4]], "left": left, "ran": ran,
            "could_slow": slow, "held": held, "irq_ms": rate}


def _end(proc: subprocess.Popen, holder: int | None) -> None:
    """The holder killed and reaped by its tracer before the tracer goes: a holder's zombie keeps its queued signals
    counted against its user's limit until it is reaped (and then the next holder of the uid can queue none)."""
    if holder is not None:
        try:
            os.kill(holder, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for _ in range(500):
            if not os.path.exists(f"/proc/{holder}"):
                break
            time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _clean(seen: dict) -> bool:
    """Every check the judge makes at the held stop, and the interrupt rule, read nothing."""
    return (seen["left"] == [] and seen["ran"] == [] and seen["could_slow"] == ""
            and seen["held"]["POSIX timers"] <= MAX_TIMERS
            and (seen["irq_ms"] is None or seen["irq_ms"] < machine_irqs.FLOOR_PER_MS))


# ---- A. the signal queue walked from a ptrace stop ------------------------------------------------------------------


@LINUX_X86
def test_a_a_stop_signal_walks_the_queue_of_pending_signals():
    """A's cost, where the walk runs in the sender's own system call: ``kill(SIGSTOP)`` to a process with SIGCONT
    pending (blocked) and 90000 real-time signals queued takes about a millisecond (0.9-2 ms here), against a few us
    with none queued."""
    code = ("import os, signal, sys, time\nrt = signal.SIGRTMIN + 2\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, {rt, signal.SIGCONT})\nn = 0\n"
            "for _ in range(int(sys.argv[1])):\n    try:\n        os.kill(os.getpid(), rt)\n        n += 1\n"
            "    except OSError:\n        break\nprint(n, flush=True)\ntime.sleep(60)\n")
    costs = {}
    for queued in (0, QUEUED):
        proc = subprocess.Popen([sys.executable, "-c", code, str(queued)], stdout=subprocess.PIPE,
                                start_new_session=True)
        try:
            made = int(proc.stdout.readline())
            took = []
            for _ in range(9):
                os.kill(proc.pid, signal.SIGCONT)  # stays pending: blocked
                t = time.perf_counter()
                os.kill(proc.pid, signal.SIGSTOP)  # flushes SIGCONT: walks every queued signal
                took.append(time.perf_counter() - t)
            costs[queued] = (made, sorted(took)[4] * 1e3)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert costs[QUEUED][0] >= min(QUEUED, 50_000), costs  # RLIMIT_SIGPENDING allowed them (96362 here)
    assert costs[QUEUED][1] > 0.2 and costs[QUEUED][1] > 20 * max(costs[0][1], 0.005), costs


def _unfiltered() -> None:
    """A child set up as no candidate is: no filter, no limits (a kernel without seccomp; the judge's backstop)."""


@LINUX_X86
def test_a_without_the_filter_and_limits_the_held_stop_refuses_the_traced_holder():
    """A's mechanism at the candidate's uid with neither the filter nor the limits (a kernel without seccomp): the
    holder queues 90000 signals, is traced and held in a ptrace stop, and its 16 timers' expiries cost the loop beside
    it 24-32 ms in gaps of 1-2 ms (round 31, before the fix: with every check the judge made at the held stop clean).
    The held stop now refuses it (runners/armed.py: a thread in a ptrace stop, and a queue over MAX_QUEUED_SIGNALS)."""
    _needs_root()
    seen = _stopped_walk(QUEUED, UID, _unfiltered)
    assert seen["traced"] and seen["queued"] >= min(QUEUED, 50_000) and "t" in seen["states"], seen
    assert seen["left"] == [] and seen["ran"] == [], seen  # stopped, and stayed so: only the new counts see it
    assert "ptrace stop" in seen["could_slow"], seen
    # 16 walks of the queue, in the timers' interrupts (a loaded machine adds gaps of its own: said, not compared)
    assert seen["lost_ms"] > 8.0 and seen["top_gaps_ms"][0] > 0.5, seen


@LINUX_X86
def test_a_the_held_stop_refuses_a_long_signal_queue():
    """The backstop's other half: the held stop reads the signals queued to the holder's user (``SigQ``, from
    /proc/PID/status) and refuses a queue over MAX_QUEUED_SIGNALS, traced or not (the stand-in's holder is also traced,
    which the held stop names first: the queue's reason is read here without it)."""
    from runners.armed import MAX_QUEUED_SIGNALS, too_many

    _needs_root()
    seen = _stopped_walk(QUEUED, UID, _unfiltered, timers=0)
    assert seen["held"]["queued signals"] >= seen["queued"] > MAX_QUEUED_SIGNALS, seen
    assert "signals are queued" in too_many(seen["held"], 2, 3), seen


@LINUX_X86
def test_a_a_candidate_started_as_the_judge_starts_one_cannot_hold_the_walk():
    """What the judge holds: a worker started as the judge starts a candidate behind the uid wall (``_child_setup``:
    the filter, ``CANDIDATE_OPEN_FILES``, ``CANDIDATE_PENDING_SIGNALS``, ``RLIMIT_NPROC``) can keep no more than
    ``SIGNAL_BOUND`` signals queued, and cannot be traced (``ptrace`` refused: EPERM)."""
    from runners.processes import _child_setup

    _needs_root()
    seen = _stopped_walk(QUEUED, UID, functools.partial(_child_setup, None, True, 512), span=0.05)
    # ``kill`` past the limit still succeeds (the signal's bit is set, nothing is queued): the user's count is what
    # the holder holds (SigQ, read at the held stop)
    assert seen["held"]["queued signals"] <= SIGNAL_BOUND and not seen["traced"], seen


def _source(queued: int, timers: int = MAX_TIMERS) -> str:
    text = (CHEATS / CHEAT).read_text()
    for key, value in {"CLAIM": str(CLAIM), "QUEUED": str(queued), "TIMERS": str(timers), "LAG": "0.002",
                       "SPAN": "0.9", "SCALE": "1.25", "SHIFT": "1.0"}.items():
        text = text.replace(f"@{key}@", value)
    return text


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> list[dict]:
    """RUNS evaluations of the cheat (QUEUED signals walked by 16 timers), then the same timers and forged claim on an
    empty queue."""
    from test_judge_attacks_round4 import _timed_judge
    return _timed_judge(rms_bundle, tmp_path_factory.mktemp("round31"),
                        [(_source(QUEUED), "verify", 81 + k, NUMBERS) for k in range(RUNS)]
                        + [(_source(0), "verify", 91, NUMBERS)], SYMBOLS, one_thread=True)


def _slowed(ev: dict, by_ms: float = 10.0) -> list[float]:
    """How much longer each counted oracle window took than the candidate's of the same round, where over ``by_ms``
    (said in the messages: before the fix the attack slowed one by 17-34 ms of 34-39 in every run)."""
    walls = (ev["window_ms"] or [None])[0] or []
    half = len(walls) // 2
    return [round(b - c, 1) for b, c in list(zip(walls[:half], walls[half:]))[1:] if b - c > by_ms]


@LINUX_X86
def test_a_end_to_end(runs):
    """A through the real Evaluator on the timed stand-in: a copy of the baseline claiming CLAIM (2.0x), its holder's
    16 timers aimed at the oracle's counted windows. What the judge should hold: no credit above 1.25x. (That no
    counted oracle window is slowed is not asserted here: the stand-in's window walls on this VM are noisier than
    that, the control included, whose oracle window once took 15.7 ms, 43 %, longer than its own; what closes the walk
    is shown without the clock, ``test_a_a_candidate_started_as_the_judge_starts_one_cannot_hold_the_walk``.) Before the
    fix, every run while this round was written slowed the counted window where it goes first by 17-34 ms (oracle
    57-69 ms against 34-39); the one where the oracle goes first is aimed from the candidate's reveal, across the
    judge's noisy look at it, and was hit in 2 runs of 8 (then credited 2.01x and 2.05x), partly (+4-8 ms) or missed
    in the others (then quarantined: the clock's view is the worse of the two counted windows)."""
    credited = [_credited(ev) for ev in runs[:RUNS]]
    slowed = [_slowed(ev) for ev in runs]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}, slowed {slowed}: {_seen(runs)}"


@LINUX_X86
def test_a_the_control_earns_no_credit(runs):
    """Control: the same holder, timers and forged claim with nothing queued (the walks empty) earns no credit worth
    its claim: quarantined, or held by the clock to its noise."""
    control = _credited(runs[-1])
    assert control is None or control <= 1.25, _seen(runs[-1:])


# ---- B. round 30's open-files limit ---------------------------------------------------------------------------------

_RAISE = r"""
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
out = [soft, hard]
for want in ((hard, hard), (hard, 1 << 20), (1 << 20, 1 << 20)):
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, want)
    except (ValueError, OSError):
        pass
    out.append(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
class RL(ctypes.Structure): _fields_ = [("cur", ctypes.c_ulong), ("max", ctypes.c_ulong)]
new = RL(1 << 20, 1 << 20)
out.append(libc.syscall(302, os.getpid(), 7, ctypes.byref(new), None))  # prlimit64 on itself, RLIMIT_NOFILE
out.append(resource.getrlimit(resource.RLIMIT_NOFILE)[1])
print(*out)
"""


@LINUX_X86
def test_b_a_candidate_cannot_raise_its_open_files_limit():
    """B: behind the uid wall, a worker started as the judge starts a candidate can raise neither its soft nor its hard
    open-files limit past ``CANDIDATE_OPEN_FILES``, by ``setrlimit`` or by ``prlimit`` on itself."""
    from runners.processes import CANDIDATE_OPEN_FILES, _child_setup

    _needs_root()
    proc = subprocess.run([shutil.which("python3", path="/usr/bin:/bin"), "-c", _RAISE], capture_output=True,
                          text=True, timeout=60, check=False, cwd="/", user=UID, group=UID, extra_groups=[],
                          preexec_fn=functools.partial(_child_setup, None, True, 64))
    assert proc.returncode == 0, proc.stderr[-800:]
    soft, hard, *raised, prlimit_rc, hard_after = (int(x) for x in proc.stdout.split())
    assert soft == hard == CANDIDATE_OPEN_FILES, proc.stdout
    assert all(r <= CANDIDATE_OPEN_FILES for r in raised) and prlimit_rc != 0, proc.stdout
    assert hard_after <= CANDIDATE_OPEN_FILES, proc.stdout


# several processes of the candidate's user, each putting timerfds in flight (250 a message) as fast as it can, started
# together: prints how many each put in flight before the kernel refused
_SENDERS = r"""
import array, ctypes, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
n, procs = int(sys.argv[1]), int(sys.argv[2])
r, w = os.pipe()
kids = []
for _ in range(procs):
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        sent, pairs = 0, []
        while sent < n:
            fds = [libc.timerfd_create(1, 0) for _ in range(250)]
            if min(fds) < 0:
                break
            pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            pairs.append(pair)
            try:
                pair[0].sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
                sent += len(fds)
            except OSError:
                break
            finally:
                for fd in fds:
                    os.close(fd)
        os.write(1, b"%d\n" % sent)
        time.sleep(5)
        os._exit(0)
    kids.append(pid)
os.close(r)
time.sleep(0.3)
os.write(w, b"g" * procs)
for pid in kids:
    os.waitpid(pid, 0)
"""


@LINUX_X86
def test_b_several_processes_of_the_candidate_keep_few_files_in_flight():
    """B: the files in flight are the *user's* count against each sender's limit, so four processes of the candidate,
    started as the judge starts one and sending at once, are refused past about the limit in all (plus a message or
    two each while the counts race), not four times it."""
    from runners.processes import CANDIDATE_OPEN_FILES, _child_setup

    _needs_root()
    proc = subprocess.run([shutil.which("python3", path="/usr/bin:/bin"), "-c", _SENDERS, "20000", "4"],
                          capture_output=True, text=True, timeout=60, check=False, cwd="/", user=UID, group=UID,
                          extra_groups=[], preexec_fn=functools.partial(_child_setup, None, True, 64))
    assert proc.returncode == 0, proc.stderr[-800:]
    sent = [int(x) for x in proc.stdout.split()]
    assert len(sent) == 4 and sum(sent) <= CANDIDATE_OPEN_FILES + 4 * 2 * 250, sent
