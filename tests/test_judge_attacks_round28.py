"""Attacks on the judge, twenty-eighth round: runners/syscalls.py's filter (new in round 27), the same-named kernels'
match by each event's own link (runners/timing.py ``_device_sequence``, runners/kernel_share.py), and what the held
stop (runners/alone.py) and the interrupt rule (runners/interrupts.py) leave.

A. **One timer interrupt that stalls a core for milliseconds: a timerfd fanned out through epoll**
   (``tests/cheats/round28_fans_its_timers_out_through_epoll.py``, CLOSED: a forged speedup credited before the fix).
   A timerfd's expiry wakes every waiter on its wait queue, in the timer's hard interrupt, one callback each. An epoll
   item is such a waiter (``ep_poll_callback``), and one epoll instance holds an item for each (file, descriptor
   number) pair added to it: the worker dups a timerfd to thousands of numbers, adds each to an epoll and closes the
   dups; the items live as long as the timerfd's *file*. On this VM (6.18, no CONFIG_IRQ_TIME_ACCOUNTING) an expiry
   costs about 100 ns an item: 16 timerfds x 20000 items cost the core that armed them 30-35 ms over 80-100 ms (the
   loop beside them 1.5-1.6x slower) at 0.2-0.4 interrupts a ms, the holder stopped throughout: ``stopped.ran_since``
   sees nothing, ``armed.could_slow`` counts 16 armed timerfds (``MAX_TIMERS`` is 16: allowed) and no epoll,
   ``interrupts.storm`` sees a fraction of one interrupt a ms, and ``/proc/stat``'s irq column stays 0 (the time is
   charged to the oracle's own run time). At the judge (the timed stand-in, T=16 H=256, a 38-41 ms pass): a copy of
   the baseline claiming 2.0x, 16 timers x 50000 items armed (alternately on each core) through the oracle's two
   counted windows, was CREDITED in 8 of 10 runs, at 2.00-2.11x (1.73x in one whose stalls landed partly outside the
   window): the oracle's counted windows 57-86 ms against the candidate's 39-43 and its round-0 38-42; the interrupt
   rate over the oracle's rounds 0.15-0.43 a ms. In the other 2 one of the oracle's two counted windows was missed (the
   cheat predicts the window from round 0's timings) and the claim was quarantined. The same forged claim without the
   fan is quarantined (clock 0.99-1.00x). ``test_a_fanned_timers_earn_no_credit`` (xfail, strict: 3 runs, any credited
   run failed its assertion before the fix).
   A'. **The same with no timer any listing shows** (CLOSED with A, unit): one process's interval timer (``setitimer``, one a
   process, never listed; ``MAX_PROCESSES`` is 64) whose SIGALRM (blocked) wakes a signalfd watched by 150000 epoll
   items: 13-25 ms of the core beside it in one interrupt, ``held_timers`` all zeros. Lowering ``MAX_TIMERS`` to 0 does
   not close A. (Side effect: every signal the judge sends such a worker, its own SIGSTOP included, costs the judge
   the same walk, about 16 ms per 160000 items: the judge's time, outside any timed request.)
   Fix (landed): deny the fan itself. The worker (runners/wire.py uses ``select``; subprocess uses ``poll``) needs no epoll:
   answer ``epoll_create``/``epoll_create1``/``epoll_ctl`` (and ``signalfd``/``signalfd4``, ``timerfd_create``,
   ``timer_create``; ``inotify``/``fanotify`` whose queues are other wait queues to hang items on) with ENOSYS in
   runners/syscalls.py. Counting items (``/proc/PID/fdinfo/N`` of an epoll lists a ``tfd:`` line an item) is not
   enough alone: an epoll (and its timerfd) sent over a unix socket and left in flight is in no table. A measurement
   that would see it: not the interrupt count but the oracle's lost time, which this kernel does not account (no irq
   time accounting, no /proc/pressure/irq); a canary on each core timing its own gaps during the oracle's window
   would, at a core's cost. What landed: ``epoll_create`` and ``epoll_create1`` answer ENOSYS in the candidate's
   worker (without an epoll there are no items; a waiter in ``poll`` or ``select`` leaves the wait queue when its
   thread is stopped); timerfds, signalfds and POSIX timers stay (a single waiter each), and ``could_slow`` still
   counts them. The cheat now fails at its first epoll and is refused (``test_a_fanned_timers_earn_no_credit``,
   ``test_a_under_the_filter_a_worker_cannot_make_the_fan``).

B. **User and network namespaces** (CLOSED as an interface; no harm measured). Under the filter, as another uid, a worker
   may ``unshare(CLONE_NEWUSER | CLONE_NEWNET)``; in its own namespace it holds CAP_NET_RAW/NET_ADMIN there, and a
   packet socket (AF_PACKET, refused outside: EPERM), netlink (to bring ``lo`` up and attach a qdisc: TBF and HTB are
   built in here) and raw frames through ``lo`` are its own. A shaped qdisc releases its queue from its watchdog timer
   in softirq on the core that armed it, as round 27's paced TCP did, none of it a socket of a network family. Not
   built end to end (A is cheaper and stronger); AF_NETLINK, AF_VSOCK and AF_XDP (EPERM as a uid) are also left open.
   Fix: refuse ``unshare``/``clone``/``clone3`` with CLONE_NEWUSER (``clone3``'s flags are in memory: answer ``clone3``
   ENOSYS, glibc falls back to ``clone``) and ``setns``; allow only AF_UNIX (and AF_NETLINK if a library needs it)
   rather than deny two families. Landed as suggested (unix and netlink sockets only; ``unshare``, ``setns`` and a
   namespace ``clone`` EPERM; ``clone3`` ENOSYS): ``test_b_the_filter_keeps_a_worker_out_of_a_network_namespace_of_its_own``.

C. **Same-named kernels launched from two host threads** (CLOSED, unit, low: the lists are the worker's own report).
   A launch is recorded when Triton's ``run`` returns (runners/launches.py); a device event's link is the correlation
   id of its driver call, taken inside ``run``. Two threads: the foreign ``_fwd_kernel`` doing the work launched first
   (id 101) and its ``run`` held past its launch (a ``launch_exit_hook`` sleeping, or a thread preempted), the
   candidate's own token ``_fwd_kernel`` launched second (id 102) and returned first: recorded [own, foreign], matched in
   link order [101, 102], and the token is credited the namesake's 900 us. Fix: record the launch (and its thread)
   at the driver call (a ``launch_enter_hook``), or match nothing where the profiled call's launches came from more
   than one thread. Landed: the second (the recorder keeps the launching threads, and the worker's profile gives no
   sequence where there were several): ``test_c_two_threads_same_named_kernels_are_left_unmatched``.

D. **What held** (passing): the forged claim alone is quarantined; the filter's family check reads only the
   argument's low word, as the kernel does (family 2 with high bits set: EACCES), refuses MPTCP (AF_INET) and the x32
   numbers (ENOSYS); socketcall does not exist on x86_64 and i386 calls fail the arch check.

Runs on the timed CPU stand-in: one judge subprocess for A (three cheat runs and a control, about 30-35 s on 2 cores),
and unit tests of a few seconds each.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import CHEATS
from test_judge_attacks_round4 import _timed_judge
from test_judge_attacks_round24 import _credited, _profiled, _stub

from runners import interrupts as machine_irqs
from runners import syscalls
from runners.armed import could_slow, held_timers
from runners.kernel_share import attributed_us
from runners.stopped import ran_since

CHEAT = "round28_fans_its_timers_out_through_epoll.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 38-41 ms on the stand-in (rounds 21-27)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = 2.0
RUNS = int(os.environ.get("KS_ROUND28_RUNS", "3"))  # a run misses about one time in five
LINUX_X86 = pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64",
                               reason="the system calls' numbers here are x86_64's")


def _source(fan: int, timers: int = 16) -> str:
    text = (CHEATS / CHEAT).read_text()
    for key, value in {"CLAIM": str(CLAIM), "FAN": str(fan), "TIMERS": str(timers), "LAG": "0.002",
                       "SPAN": "0.9"}.items():
        text = text.replace(f"@{key}@", value)
    return text


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> list[dict]:
    """RUNS evaluations of the cheat (16 timerfds x 50000 epoll items), then the same forged claim without the fan."""
    return _timed_judge(rms_bundle, tmp_path_factory.mktemp("round28"),
                        [(_source(50_000), "verify", 81 + k, NUMBERS) for k in range(RUNS)]
                        + [(_source(0), "verify", 91, NUMBERS)], SYMBOLS, one_thread=True)


def _seen(evs: list[dict]) -> str:
    return "; ".join(f"{ev['stage']} ok={ev['ok']} speedups {ev['speedups']} judge ratios {ev['judge_ratios']} "
                     f"walls (ms, oracle then candidate) {ev['window_ms']} irq/ms (oracle) "
                     f"{[[q.get('irq') for q in p or []] for p in ev['parts'] or []]} {ev['messages']} "
                     f"{ev['error'][:160]}" for ev in evs)


def test_a_fanned_timers_earn_no_credit(runs):
    """A copy of the baseline claiming 2.0x, its timers fanned out through epoll and armed through the oracle's
    counted windows, earns no credit above parity: its worker cannot make an epoll (runners/syscalls.py, ENOSYS), and
    the cheat, which needs its fan, is refused before any time is taken. (Before the fix: credited 2.00-2.11x in 8 of
    10 runs.)"""
    credited = [_credited(ev) for ev in runs[:RUNS]]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}: {_seen(runs[:RUNS])}"
    assert all("Function not implemented" in ev["error"] or "ENOSYS" in ev["error"] for ev in runs[:RUNS]), \
        _seen(runs[:RUNS])


def test_a_the_forged_claim_alone_is_quarantined(runs):
    """D (control): the same module without the fan is refused at timing (the clock sees about 1.0x)."""
    ev = runs[-1]
    assert not ev["ok"] and ev["stage"] == "timing", _seen([ev])


# a stand-in for the candidate's worker, on one core: KIND "timerfd", TIMERS timerfds each watched by FAN epoll items;
# "itimer": no timer any listing shows, its interval timer's SIGALRM (blocked) read by a signalfd watched by FAN
# items. On "g" from stdin it arms them (timerfds from LEAD s to 30 ms later; the interval timer 40 ms after LEAD,
# past the walk that the judge's own SIGSTOP costs), says "q" and the first expiry, and waits to be stopped
_FAN = r"""
import ctypes, os, resource, select, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
class TS(ctypes.Structure): _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
class ITS(ctypes.Structure): _fields_ = [("interval", TS), ("value", TS)]
class TV(ctypes.Structure): _fields_ = [("sec", ctypes.c_long), ("usec", ctypes.c_long)]
class ITV(ctypes.Structure): _fields_ = [("interval", TV), ("value", TV)]
kind, timers, fan, core, lead = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
os.sched_setaffinity(0, {core})
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
base, per = 1024, max(1, min(hard - 1040, 16384))
keep = []
def fan_out(fd):
    left = fan
    while left > 0:
        ep = select.epoll()
        keep.append(ep)
        n = min(left, per)
        for j in range(n):
            os.dup2(fd, base + j)
            ep.register(base + j, select.EPOLLIN)
            os.close(base + j)
        left -= n
fds = []
if kind == "timerfd":
    for _ in range(timers):
        fds.append(libc.timerfd_create(1, 0))
        fan_out(fds[-1])
else:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    sfd = libc.signalfd(-1, (ctypes.c_ulong * 16)(1 << (signal.SIGALRM - 1)), 0)
    assert sfd >= 0, ctypes.get_errno()
    fan_out(sfd)
os.write(1, b"%d\n" % os.getpid())
if os.read(0, 1) == b"g":
    first = time.clock_gettime(time.CLOCK_MONOTONIC) + lead
    for k, fd in enumerate(fds):
        at = first + 0.03 * k / max(1, len(fds) - 1)
        libc.timerfd_settime(fd, 1, ctypes.byref(ITS(TS(0, 0), TS(int(at), int((at % 1) * 1e9)))), None)
    if kind == "itimer":
        libc.setitimer(0, ctypes.byref(ITV(TV(0, 0), TV(int(lead), int((lead % 1) * 1e6) + 40000))), None)
    os.write(1, b"q %.6f\n" % first)
time.sleep(120)
"""


def _loop(seconds: float) -> tuple[int, float]:
    t, n = time.perf_counter(), 0
    while time.perf_counter() - t < seconds:
        for _ in range(300):
            pass
        n += 1
    return n, time.perf_counter() - t


LEAD = 0.4  # the stand-in's first expiry this long after it is armed: past the judge's stop and scans (the 20 ms of
# rounds 28-31 was spent by them on a loaded CI machine, which then read no armed timer and lost no time)


def _stopped_fan(kind: str, timers: int, fan: int, seconds: float = 0.1) -> dict:
    """The stand-in made on this test's core; a quiet loop rate taken; its timers armed; the stand-in stopped as the
    judge stops a candidate; what the judge's checks read; the loop over ``seconds`` beside it from just before its
    first expiry."""
    core = sorted(os.sched_getaffinity(0))[0]
    mask = os.sched_getaffinity(0)
    proc = subprocess.Popen([sys.executable, "-c", _FAN, kind, str(timers), str(fan), str(core), str(LEAD)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    os.sched_setaffinity(0, {core})
    try:
        line = proc.stdout.readline()
        assert line.strip(), proc.stderr.read().decode(errors="replace")[-2000:]
        _loop(0.05)
        n, s = _loop(0.1)
        quiet = n / s
        proc.stdin.write(b"g")
        proc.stdin.flush()
        said = proc.stdout.readline().split()
        assert said[:1] == [b"q"], said
        worker = _stub(proc.pid)
        worker.pause()
        try:
            left = worker.still_running()
            before = worker.cpu_times()
            held = held_timers({pid for pid, _, _ in before})
            wait = float(said[1]) - 0.005 - time.clock_gettime(time.CLOCK_MONOTONIC)
            assert wait > 0, f"the judge's stop and scans took {LEAD - 0.005 - wait:.2f} s, past the stand-in's lead"
            time.sleep(wait)
            irq = machine_irqs.total()
            n, s = _loop(seconds)
            rate = machine_irqs.per_ms(irq, machine_irqs.total(), s * 1e6)
            after = worker.cpu_times()
            seen = {"still running": left, "could_slow": could_slow(before), "held": held,
                    "ran_since": ran_since(before, after)}
        finally:
            worker.resume()
        n2, s2 = _loop(0.1)
        quiet = max(quiet, n2 / s2)
    finally:
        os.sched_setaffinity(0, mask)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return {"lost_ms": (s - n / quiet) * 1000, "of_ms": s * 1000, "irq_ms": rate, **seen}


@pytest.fixture(scope="module")
def fanned() -> dict:
    """A's mechanism: 16 timerfds x 20000 epoll items, expiring 20-50 ms after they are armed, the loop beside them
    over 100 ms."""
    return _stopped_fan("timerfd", 16, 20_000)


@LINUX_X86
def test_a_fanned_timers_stall_the_core_beside_a_stopped_holder_unseen(fanned):
    """A's mechanism, measured (30-35 ms of 100 lost on this VM): the judge's checks all read as clean while a stopped
    holder's 16 timerfds, each with 20000 epoll items, take the core beside them in a handful of interrupts."""
    assert fanned["still running"] == [] and fanned["ran_since"] == [], fanned
    assert fanned["could_slow"] == "" and fanned["held"]["armed timerfds"] == 16, fanned  # within MAX_TIMERS
    assert fanned["irq_ms"] is None or fanned["irq_ms"] < machine_irqs.FLOOR_PER_MS, fanned  # under storm's floor
    assert fanned["lost_ms"] > 12.0, fanned


@LINUX_X86
def test_a_under_the_filter_a_worker_cannot_make_the_fan():
    """The fix: the stand-in above, started under the candidate's filter (runners/syscalls.py), cannot make the epoll
    its items hang on (ENOSYS), neither with timerfds nor with the signalfd of A'; armed.could_slow still counts no
    epoll items, which is why the call is refused rather than counted."""
    for kind, timers in (("timerfd", 2), ("itimer", 0)):
        proc = subprocess.run([sys.executable, "-c", _FAN, kind, str(timers), "4", "0", "0.02"], input=b"", timeout=60,
                              capture_output=True, preexec_fn=syscalls.install, check=False)
        assert proc.returncode != 0 and b"[Errno 38] Function not implemented" in proc.stderr, proc.stderr[-800:]


@LINUX_X86
def test_a_prime_an_interval_timer_and_a_signalfd_stall_the_core_with_no_timer_listed():
    """A': one process's interval timer (never listed), its blocked SIGALRM waking a signalfd watched by 150000 epoll
    items: 13-25 ms of the core in one interrupt, every count of ``held_timers`` zero (``MAX_TIMERS`` 0 would not
    close A)."""
    got = _stopped_fan("itimer", 0, 150_000)
    assert got["ran_since"] == [] and got["could_slow"] == "", got
    assert not any(v for k, v in got["held"].items() if k != "queued signals"), got  # the user's queue: ambient
    assert got["lost_ms"] > 6.0, got


# ---- B. the filter and namespaces ------------------------------------------------------------------------------------

_NAMESPACE = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
outside = libc.syscall(41, 17, 3, 0)  # AF_PACKET, SOCK_RAW
out = ["packet outside: " + ("ok" if outside >= 0 else errno.errorcode[ctypes.get_errno()])]
if libc.unshare(0x10000000 | 0x40000000) == 0:  # CLONE_NEWUSER | CLONE_NEWNET
    inside = libc.syscall(41, 17, 3, 0)
    out.append("namespace: ok")
    out.append("packet inside: " + ("ok" if inside >= 0 else errno.errorcode[ctypes.get_errno()]))
else:
    out.append("namespace: " + errno.errorcode[ctypes.get_errno()])
print("; ".join(out))
"""


def _as_other_user(code: str) -> str:
    python = shutil.which("python3", path="/usr/bin:/bin") or ""
    if os.geteuid() != 0 or not python:
        pytest.skip("needs root (to run the probe as another uid) and a system python3 every user may run")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=False,
                          preexec_fn=syscalls.install, user=62998, group=62998, extra_groups=[], cwd="/")
    assert proc.returncode == 0, proc.stderr[-1500:]
    return proc.stdout.strip()


@LINUX_X86
def test_b_outside_a_namespace_a_uid_may_not_make_a_packet_socket():
    """Control for B: as another uid, without a namespace of its own, a packet socket is refused (EPERM by the kernel
    before the fix, EACCES by the filter's families now)."""
    assert "packet outside: EACCES" in _as_other_user(_NAMESPACE)


@LINUX_X86
def test_b_the_filter_keeps_a_worker_out_of_a_network_namespace_of_its_own():
    """B, closed: ``unshare(CLONE_NEWUSER | CLONE_NEWNET)`` gets EPERM under the filter, so no packet socket or qdisc
    of a namespace of its own (before the fix: a namespace, and a packet socket in it)."""
    seen = _as_other_user(_NAMESPACE)
    assert "namespace: EPERM" in seen and "packet inside" not in seen, seen


_FAMILIES = r"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
print(call(41, 2 | (1 << 32), 1, 0), call(41, 2, 1, 262), call(41, 10, 2, 0), call(0x40000000 | 41, 2, 1, 0),
      call(0x40000000 | 206, 8, 0))
"""


@LINUX_X86
def test_d_the_family_check_reads_the_argument_as_the_kernel_does():
    """D: family 2 with high bits set (the kernel reads an int), MPTCP over AF_INET, UDP over AF_INET6: EACCES; the
    x32 numbers of socket and io_setup: ENOSYS."""
    proc = subprocess.run([sys.executable, "-c", _FAMILIES], capture_output=True, text=True, timeout=60, check=False,
                          preexec_fn=syscalls.install)
    assert proc.stdout.split() == ["EACCES", "EACCES", "EACCES", "ENOSYS", "ENOSYS"], (proc.stdout, proc.stderr[-800:])


# ---- C. same-named kernels launched from two threads -----------------------------------------------------------------

def test_c_two_threads_same_named_kernels_are_left_unmatched(monkeypatch):
    """C, closed: the foreign ``_fwd_kernel`` (the work, 900 us) launched first from one thread but its ``run`` returned
    last, the candidate's own token ``_fwd_kernel`` (4 us) launched second from another thread and returned first: the
    record reads [own, foreign], the links [101, 102], and matched by order the token took its namesake's 900 us.
    The recorder keeps the launching threads (runners/launches.py), and the worker's profile of a call whose launches
    came from more than one thread gives no sequence, so nothing is matched (the name stays uncounted, as before the
    match)."""
    import threading
    import types

    from runners import launches, worker
    from runners.timing import _device_sequence

    def kernel(module, name, hold):
        def run(self, *args, **kwargs):
            hold.wait(5)
        return types.SimpleNamespace(fn=types.SimpleNamespace(__module__=module, __name__=name)), run

    def call():  # the foreign kernel held in its run until the token's thread has returned
        token_done = threading.Event()
        foreign, run_f = kernel("vendor.attention", "_fwd_kernel", token_done)
        token, run_t = kernel("cand.kernels", "_fwd_kernel", threading.Event())
        hooked_f = launches._hooked(run_f, "_RECORD", "__t__")
        hooked_t = launches._hooked(lambda self, *a, **k: None, "_RECORD", "__t__")
        first = threading.Thread(target=hooked_f, args=(foreign,))
        first.start()
        second = threading.Thread(target=lambda: (hooked_t(token), token_done.set()))
        second.start()
        first.join()
        second.join()

    def profiled(fn, around):
        with around:
            fn()
        events = _profiled(("_fwd_kernel", 10.0, 900.0, 101), ("_fwd_kernel", 950.0, 4.0, 102))
        return [("_fwd_kernel", 904.0)], _device_sequence(events)

    monkeypatch.setattr(worker, "device_kernels", profiled)
    server = worker.Server(None)
    server.fn = call
    server._bank = lambda req: types.SimpleNamespace(slots=[{}])
    reply = server.profile({})
    assert reply["launches"] == ["cand.kernels:_fwd_kernel", "vendor.attention:_fwd_kernel"], reply  # return order
    assert reply["sequence"] is None, reply
    own = ["cand.kernels:_fwd_kernel"]
    assert attributed_us(reply["sequence"], reply["launches"], own) == 0.0


def test_c_one_thread_same_named_kernels_are_matched_to_their_own_launches():
    """Control for C: from one thread return order is launch order, and the token gets its own 4 us."""
    from runners.timing import _device_sequence

    launches = ["vendor.attention:_fwd_kernel", "cand.kernels:_fwd_kernel"]
    own = ["cand.kernels:_fwd_kernel"]
    sequence = _device_sequence(_profiled(("_fwd_kernel", 10.0, 900.0, 101), ("_fwd_kernel", 950.0, 4.0, 102)))
    assert attributed_us(sequence, launches, own) == pytest.approx(4.0)
