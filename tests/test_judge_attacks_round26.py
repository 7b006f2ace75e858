"""Attacks on the judge, twenty-sixth round: what the last session changed after round 25 (aio contexts refused,
runners/armed.py ``_aio_contexts``/``too_many``; the candidate's interrupt cap lifted to the machine's own rate taken
before any candidate ran, runners/interrupts.py ``ambient``/``storm`` and runners/sandbox.py ``Evaluator.ambient_irq``;
the oracle's checkpoints timed under the held stop, runners/judge_clock.py ``_clock_rounds``; same-named kernels
matched only by each event's own launch link, runners/kernel_share.py ``attributed_us``).

A. **An aio context whose ring is unmapped** (``tests/cheats/round25_hides_its_timers_in_aio_polls.py`` with HIDE
   "cover", CLOSED: a
   candidate's worker may not call ``io_setup``, ``io_submit`` or ``io_uring_setup``, runners/syscalls.py).
   ``_aio_contexts`` counts the ``[aio]`` lines of ``/proc/PID/maps``; the mapping is only the ring's view. The
   context lives in the process's ``mm`` (``ioctx_table``), the kernel reaches the ring through its own page list,
   and ``aio_ring_vm_ops`` has no ``close``: ``munmap`` of the ring, or a ``MAP_FIXED`` anonymous mapping laid over
   it, leaves the context and all its poll requests alive with no ``[aio]`` line anywhere (``io_submit`` and
   ``io_destroy`` look the context up by the id word of the user's ring: copied into the cover, both work); only
   ``/proc/sys/fs/aio-nr`` still counts its events (2000 of 2000 while it lived, 0 after its kill).
   Stand-in (this VM, 2 cores): 40000 timerfds in aio polls, ring unmapped (or covered), due in 8 bursts over
   60 ms on the core a busy loop runs on, the holder stopped as the judge stops a candidate: the loop 3.1-3.9x slower
   (5 of 5 runs: unmapped 3.77, 3.08, 3.61; covered 3.87, 3.80), the machine at 0.6-0.8 interrupts a ms (``storm``
   silent against a candidate at 0), ``still_running`` empty and ``held_timers`` all zeros, aio contexts 0. At the
   judge: round 25's cheat with the ring covered is never refused for its aio contexts (the fix of round 25 reads 0):
   a forged 2.5x credited 2.53x, 2.48x, 2.49x and 2.49x in 4 runs of 5 while this round was written (the fifth
   refused for a claim above the clock's 1.57x). Fix (runners/armed.py): count aio contexts
   where the kernel keeps them, not where the process maps them: ``/proc/sys/fs/aio-nr`` read before the candidate's
   worker is spawned and again at each settled stop (any growth while the judge's own and the oracle's hold none is
   the candidate's: refuse), or better, since aio-nr is machine-wide, forbid the calls: a seccomp filter in the
   worker's preload (``io_setup``, ``io_submit``, ``io_uring_setup``: no honest Triton/torch worker makes them; none
   of the venv's shared objects here names ``io_setup`` or libaio; a CUDA torch's cuFile/GDS is loaded only on use).

   Read, measured, not found (passing tests or numbers only): an aio context made by a child that then exits dies with
   its ``mm`` (aio-nr back to 0; the loop 1.00-1.02x); timerfds added to an epoll and closed are released, the epoll
   holding no reference (1.00-1.01x); round 23's timerfds in flight over a unix socket, batched as round 25 (18000 in 8
   bursts): 1.09-1.25x at 0.4 interrupts a ms, unflagged but a timerfd without a waiter costs its core little (a
   candidate's RLIMIT_NOFILE bounds them): under the stand-in clock's tolerance for a forged 2.5x.

B. **The ambient rate is whatever ran while the evaluator started** (``tests/cheats/round26_lifts_the_ambient_rate.py``,
   CLOSED: the evaluator keeps the least of samples taken at its start and before each candidate,
   runners/interrupts.py ``Ambient``). ``Evaluator.__init__`` samples the machine's interrupts once, over 30 ms of sleep, and
   ``storm`` then lets the candidate's own rate count up to that ambient rate for the evaluator's life (a job of
   hours). The sample's noise is not the problem: idle, 40 samples here read 0.03-0.53 a ms (median 0.07). What runs
   then is: a helper sleeping 1 us at a time (round 24's B) on the other core lifts it to 41-42 a ms (20 samples), so
   the allowance for every later candidate is 5 + 2 x 41 = 87 a ms, and round 24's B (a candidate's own helper making
   its rounds noisy, about 38 a ms; a flood of 38-45 a ms through the oracle's) passes ``storm`` again. Who can run it:
   a candidate of another job on the host (evaluators started together claim uids of their own, runners/isolation.py,
   and none stops or kills another's), or, without the uid wall, a helper a previous job's candidate left in a session
   of its own (only its worker's group is killed). Fix (runners/sandbox.py, runners/interrupts.py): take the ambient
   rate where no candidate of any evaluator can act, or never let it exceed what the oracle sees alone: e.g. re-sample
   it between candidates (after the last one's processes are killed, the spare stopped) and keep the least of all
   samples, each the least of several short ones; and lift the cap no further than the oracle's own rate over its
   samples (timed with the candidate stopped) so that a rate the machine had only while the evaluator started cannot
   widen the allowance for the job.

C. **The checkpoints timed under the held stop** (runners/judge_clock.py, CLOSED, no hole found). The held stop (wait
   for every thread, count what it holds, check after that nothing ran) now also covers the oracle's reveal. An honest
   stopped worker (threads blocked in a pipe read and a sleep, as a worker waits for its next request) is held and
   released 8 times of 8 without a refusal (``_alone(oracle, settled=True)`` around a 30 ms reveal), the stop costing a
   few ms. It adds no refusal an honest worker could meet that the oracle's window (settled since round 21) did not
   already; what the candidate could do in the reveal (round 25's B) is what the held stop refuses.

D. **Launches recorded when ``run`` is entered, launched when it ends** (``tests/cheats/round26_launches_the_work_from
   _its_grid.py``, CLOSED: runners/launches.py records a launch once ``run`` returns). ``attributed_us`` matches a
   colliding name's events, in the order of their
   launch links, to the call's recorded launches in record order. runners/launches.py ``_hooked`` records a launch on
   entry to ``JITFunction.run``, and ``run`` evaluates a callable grid before it launches: a kernel launched from the
   candidate's grid callable is recorded *after* the candidate's kernel and launched (its link smaller) *before* it.
   On the interpreter: the record reads [cand_kernels._fwd_kernel, vendor_attention._fwd_kernel] while the vendor's
   kernel ran first (its output shows it, every run); so a token ``_fwd_kernel`` of 4 us gets the vendor
   ``_fwd_kernel``'s 900 us (``attributed_us`` = 900 of a profile whose links follow the launches). Deterministic, one
   thread, no race; not run on a GPU (the links' order there is the runtime's, launch by launch: round 24's D). Fix
   (runners/launches.py): record the launch where it happens, not where ``run`` is entered: append after ``run``
   returns (a launch nested in the grid then comes first, as it was launched) or from Triton's launch-enter hook, and
   leave a colliding name uncounted where a recorded launch of it happened inside another's ``run`` (a depth counter in
   the hook) or on a second host thread; better, tag each launch with a ``record_function`` range and match device
   events to their launch through the profiler's own runtime event (correlation id to its innermost range).

Runs on the timed CPU stand-in: one judge subprocess for A's two evaluations (about 20 s on 2 cores; the file about
21-23 s), and unit tests of a few seconds.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import CHEATS
from test_judge_attacks_round4 import _timed_judge
from test_judge_attacks_round24 import _profiled, _stub
from test_judge_attacks_round25 import _aio_room, _loop_rate, _seen

from runners import interrupts as machine_irqs
from runners.armed import could_slow, held_timers
from runners.kernel_share import attributed_us

ROOT = CHEATS.parent.parent
CHEAT = "round25_hides_its_timers_in_aio_polls.py"  # with HIDE "cover"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 38 ms on the stand-in (rounds 21-25)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = 2.5
RUNS = int(os.environ.get("KS_ROUND26_RUNS", "1"))  # refusal (or not) is the same in every run: one suffices
X86 = pytest.mark.skipif(os.uname().machine != "x86_64", reason="the aio system calls' numbers on this architecture")


def _source(hide: str) -> str:
    text = (CHEATS / CHEAT).read_text()
    for key, value in {"ARMED": "aio", "HIDE": hide, "CLAIM": str(CLAIM), "TIMERS": "60000", "LAG_MS": "5",
                       "BURSTS": "20"}.items():
        text = text.replace(f"@{key}@", value)
    return text


def _aio_nr() -> int:
    with open("/proc/sys/fs/aio-nr") as f:
        return int(f.read())


# ---- A. an aio context whose ring is unmapped -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> list[dict]:
    """Round 25's cheat with each context's ring covered (its id word kept), at the judge. While this round was
    written (5 runs, seeds 61-65): never refused for aio contexts; credited 2.53x, 2.48x, 2.49x and 2.49x of a forged
    2.5x in 4 runs (the oracle's counted windows 60-117 ms against the candidate's 40-45, 0.6-1.2 interrupts a ms),
    refused in one for a claim above what the clock saw (1.57x)."""
    if os.uname().machine != "x86_64" or not _aio_room(60_000):
        pytest.skip("needs x86_64 and 60000 aio events free (/proc/sys/fs/aio-max-nr)")
    return _timed_judge(rms_bundle, tmp_path_factory.mktemp("round26"),
                        [(_source("cover"), "verify", 61 + k, NUMBERS) for k in range(RUNS)], SYMBOLS,
                        one_thread=True)


def test_a_flood_behind_a_hidden_ring_is_refused(runs):
    """The candidate's worker cannot make an aio context at all (runners/syscalls.py: io_setup answers ENOSYS), so the
    cheat's worker fails before any flood: refused, credited nothing."""
    credited = [max(s or 0.0 for s in ev["speedups"]) if ev["ok"] else None for ev in runs]
    print("round 26 A at the judge:", credited, _seen(runs))
    assert all(not ev["ok"] for ev in runs), _seen(runs)


# a stand-in for the candidate's worker: COUNT timerfds held by aio polls (or as MODE says), on one core, due AT
# seconds past twice the time their set-up is expected to take (paced as round 25's), in BURSTS instants over SPAN
# seconds; prints its pid and the flood's start, then waits
_HOLDER = r"""
import ctypes, os, struct, sys, time
count, core, at, bursts, span, mode = (int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]),
                                       float(sys.argv[5]), sys.argv[6])
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class Itimerspec(ctypes.Structure):
    _fields_ = [("interval", Timespec), ("value", Timespec)]


os.sched_setaffinity(0, {core})
CAL, value = 1000, Itimerspec()


def polls():
    global start
    ctx = ctypes.c_ulong(0)
    assert libc.syscall(206, count + CAL, ctypes.byref(ctx)) == 0, ctypes.get_errno()  # io_setup
    size = 0
    for line in open("/proc/self/maps"):
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if lo == ctx.value and "[aio]" in line:
            size = hi - lo
    assert size
    if mode == "cover":  # anonymous, MAP_FIXED over the ring, its id word (which io_submit looks the context up by) kept
        ring_id = ctypes.c_uint.from_address(ctx.value).value
        assert libc.mmap(ctx.value, size, 3, 0x32, -1, 0) == ctx.value
        ctypes.c_uint.from_address(ctx.value).value = ring_id
    iocb = ctypes.create_string_buffer(64)
    iocbp = ctypes.pointer(ctypes.c_void_p(ctypes.addressof(iocb)))
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    start = t0 + 3600.0  # the first CAL timers: an hour out, never due; their pace sets when the others are due
    for k in range(-CAL, count):
        if k == 0:
            now = time.clock_gettime(time.CLOCK_MONOTONIC)
            start = now + 2.0 * (now - t0) * count / CAL + at
        fd = libc.timerfd_create(1, 0o2004000)
        t = start + span * (k % bursts) / bursts
        value.value.sec, value.value.nsec = int(t), int((t % 1) * 1e9)
        assert libc.timerfd_settime(fd, 1, ctypes.byref(value), None) == 0
        struct.pack_into("<QIiHhIQQqQII", iocb, 0, k + CAL, 0, 0, 5, 0, fd, 1, 0, 0, 0, 0, 0)  # IOCB_CMD_POLL, POLLIN
        assert libc.syscall(209, ctx, 1, iocbp) == 1, ctypes.get_errno()  # io_submit
        os.close(fd)
    if mode == "munmap":  # after the requests: they live on (a later io_submit would find no ring: EINVAL)
        assert libc.munmap(ctx.value, size) == 0


if mode == "child":  # made by a child that then exits
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            mode = "munmap"
            polls()
            os.write(w, b"%.6f" % start)
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    start = float(os.read(r, 64) or "nan")  # nothing: the child failed
else:
    polls()
os.write(1, b"%d %.6f\n" % (os.getpid(), start))
time.sleep(120)
"""


@contextlib.contextmanager
def _holder(mode: str, count: int, core: int, at: float, bursts: int = 1, span: float = 0.0):
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(count), str(core), str(at), str(bursts), str(span),
                             mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = proc.stdout.readline().split()
        assert line, proc.stderr.read().decode(errors="replace")[-2000:]
        yield int(line[0]), float(line[1])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _stopped_view(pid: int) -> dict:
    """What the judge reads of the holder stopped as a candidate (``still_running``, ``could_slow``, ``held_timers``),
    with the machine's aio events and the holder's [aio] mappings."""
    worker = _stub(pid)
    worker.pause()
    try:
        left = worker.still_running()
        before = worker.cpu_times()
        with open(f"/proc/{pid}/maps") as f:
            maps = sum("[aio]" in line for line in f)
        return {"left": left, "could_slow": could_slow(before), "held": held_timers({str(pid)}), "maps": maps,
                "aio_nr": _aio_nr()}
    finally:
        worker.resume()


@pytest.fixture(scope="module")
def hidden() -> dict:
    """Each way of hiding the ring, 3000 timers an hour out, read while stopped."""
    if os.uname().machine != "x86_64" or not _aio_room(8000):
        pytest.skip("needs x86_64 and 8000 aio events free")
    seen = {}
    for mode in ("munmap", "cover"):
        base = _aio_nr()
        with _holder(mode, 3000, 0, 3600.0) as (pid, _):
            seen[mode] = {**_stopped_view(pid), "base": base}
    return seen


@pytest.mark.parametrize("mode", ["munmap", "cover"])
def test_a_ring_unmapped_or_covered_leaves_its_context_alive_in_no_mapping(hidden, mode):
    """The set-up of A: no [aio] mapping, the context's events still in the machine's count, the holder stopped."""
    seen = hidden[mode]
    assert seen["maps"] == 0 and seen["aio_nr"] - seen["base"] >= 3000 and not seen["left"], seen


@pytest.mark.parametrize("mode", ["munmap", "cover"])
def test_a_context_behind_a_hidden_ring_is_not_seen_by_the_listings(hidden, mode):
    """What runners/armed.py alone cannot see, in a process without the candidate's seccomp filter (this stand-in):
    the filter, not the listing, is what holds (tests/test_syscalls.py)."""
    assert not hidden[mode]["could_slow"], hidden[mode]


@X86
def test_timers_behind_an_unmapped_ring_slow_work_beside_them_unflagged():
    """The mechanism of A: round 25's flood (40000 timers in 8 bursts over 60 ms on this loop's core) with the ring
    unmapped: the loop far slower than the clock's tolerance, the machine's interrupts under what ``storm`` flags, and
    nothing that ``could_slow`` reads (3.1-3.9x over 5 runs on this VM)."""
    if not _aio_room(41_000):
        pytest.skip("no room for 41000 aio events")
    core = sorted(os.sched_getaffinity(0))[0]
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        with _holder("munmap", 40_000, core, 0.5, bursts=8, span=0.06) as (pid, start):
            worker = _stub(pid)
            worker.pause()
            try:
                judged = could_slow(worker.cpu_times())
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
    assert quiet / loud >= 1.3 and judged == "", (quiet / loud, rate, judged)
    assert rate is not None and not machine_irqs.storm([rate] * 3, [0.0] * 3), (quiet, loud, rate)


@X86
def test_an_aio_context_dies_with_the_child_that_made_it():
    """Read, not found: a context made by a child (its ring unmapped) that then exited is gone (aio-nr back)."""
    if not _aio_room(4000):
        pytest.skip("no room for 4000 aio events")
    base = _aio_nr()
    with _holder("child", 3000, 0, 3600.0):
        after = _aio_nr()
    assert after <= base, (base, after)


# ---- B. the ambient rate is whatever ran while the evaluator started -----------------------------------------------

@pytest.fixture(scope="module")
def lifted() -> dict:
    """``interrupts.ambient()`` as ``Evaluator.__init__`` takes it, idle and with round 24's helper running on the
    other core (a candidate of another job, or a previous job's leftover without the uid wall)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    idle = min(machine_irqs.ambient() for _ in range(3))
    proc = subprocess.Popen([sys.executable, str(CHEATS / "round26_lifts_the_ambient_rate.py"), str(cores[-1])],
                            stdout=subprocess.PIPE, start_new_session=True)
    try:
        proc.stdout.readline()
        time.sleep(0.1)
        busy = machine_irqs.ambient()  # what the evaluator would keep for its life
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if busy is None or busy < 12.0:
        pytest.skip(f"the helper made only {busy} interrupts a ms here (a loaded machine)")
    return {"idle": idle, "busy": busy}


def test_the_helper_lifts_the_ambient_rate(lifted):
    """The set-up of B: 41-42 a ms here with the helper, against 0.03-0.53 idle."""
    assert lifted["busy"] > machine_irqs.CANDIDATE_CAP_PER_MS > (lifted["idle"] or 0.0), lifted


def test_a_flood_past_the_cap_is_flagged_whatever_ran_as_the_evaluator_started(lifted):
    """Round 24's B with the lifted rate: the candidate's own rounds made noisy to the helper's rate, the oracle's
    rounds flooded to 5 + 1.9x that (a quiet machine: 0.03-0.53 a ms of its own); flagged with the ambient rate the
    machine has without the helper, passed with the one the evaluator keeps."""
    a = lifted["busy"]
    oracle, candidate = [5.0 + 1.9 * a] * 3, [a] * 3
    assert machine_irqs.storm(oracle, candidate, lifted["idle"])  # control: the same rounds, the true ambient rate
    kept = machine_irqs.Ambient()  # as the evaluator keeps it: the lifted sample at its start, quieter ones after
    kept.note(a)
    kept.sample()
    assert kept.rate <= max(lifted["idle"] or 0.0, 12.0) and machine_irqs.storm(oracle, candidate, kept.rate), \
        (lifted, kept.rate, oracle, candidate)


# ---- C. the checkpoints timed under the held stop ------------------------------------------------------------------

_WAITER = r"""
import os, sys, threading, time
r, w = os.pipe()
threading.Thread(target=lambda: os.read(r, 1), daemon=True).start()   # a reader waiting on its pipe
threading.Thread(target=lambda: time.sleep(600), daemon=True).start()  # and a sleeper
os.write(1, b"%d\n" % os.getpid())
os.read(r, 1)
"""


def test_an_honest_stopped_worker_is_held_through_the_reveal_without_a_refusal():
    """The reveal's held stop (C) on a process waiting as a worker waits: held and released 8 times, never refused."""
    from runners.alone import Alone

    proc = subprocess.Popen([sys.executable, "-c", _WAITER], stdout=subprocess.PIPE, start_new_session=True)
    try:
        pid = int(proc.stdout.readline())
        time.sleep(0.2)
        judge = Alone()
        judge.oracle, judge.candidate, judge.bystanders = object(), _stub(pid), []
        costs = []
        for _ in range(8):
            t = time.perf_counter()
            with judge._alone(judge.oracle, settled=True):
                time.sleep(0.03)  # the oracle's reveal
            costs.append(time.perf_counter() - t - 0.03)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert max(costs) < 1.0, costs  # a few ms here


# ---- D. launches recorded when ``run`` is entered ------------------------------------------------------------------

_RECORD = textwrap.dedent(r"""
    import importlib.util, json, os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
    from runners import launches
    launches.install()
    import torch
    spec = importlib.util.spec_from_file_location("cand_kernels", sys.argv[3])
    cand = importlib.util.module_from_spec(spec); spec.loader.exec_module(cand)
    import vendor_attention
    x = torch.ones(8)
    with launches.Recorder() as record:
        cand.run(x, vendor_attention._fwd_kernel)
    print(json.dumps({"record": [f"{m}:{n}" for m, n in record], "x": float(x[0])}))
""")

_VENDOR = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def _fwd_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)
""")


@pytest.fixture(scope="module")
def grid_launch(tmp_path_factory) -> dict:
    """The cheat's call on the interpreter: what runners/launches.py records, and which kernel ran first (x = 1: the
    vendor's doubling first then the token's +1 gives 3; the token first, 4)."""
    folder = tmp_path_factory.mktemp("round26d")
    (folder / "vendor_attention.py").write_text(_VENDOR)
    out = subprocess.run([sys.executable, "-c", _RECORD, str(ROOT), str(folder),
                          str(CHEATS / "round26_launches_the_work_from_its_grid.py")],
                         capture_output=True, text=True, timeout=120, check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("{")), None)
    assert line, out.stderr[-3000:]
    return json.loads(line)


def test_a_kernel_launched_from_the_grid_is_recorded_in_launch_order(grid_launch):
    """The set-up of D, closed: the record (made once each ``run`` returns) follows the device (here the interpreter)."""
    assert grid_launch["record"] == ["vendor_attention:_fwd_kernel", "cand_kernels:_fwd_kernel"], grid_launch
    assert grid_launch["x"] == 3.0, grid_launch  # the vendor's kernel ran first


def test_a_token_kernel_does_not_get_the_time_of_a_namesake_launched_from_its_grid(grid_launch):
    """The profile of that call on a GPU (links in launch order: the vendor's 900 us first) against the record."""
    from runners.timing import _device_sequence

    sequence = _device_sequence(_profiled(("_fwd_kernel", 10.0, 900.0, 101), ("_fwd_kernel", 920.0, 4.0, 102)))
    own = [k for k in grid_launch["record"] if k.startswith("cand_kernels:")]
    assert attributed_us(sequence, grid_launch["record"], own) <= 4.0 + 1e-6
