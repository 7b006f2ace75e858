"""Attacks on the judge, twenty-seventh round: kernel work a stopped candidate leaves armed that lands on the oracle's
core batched (many expiries an interrupt, so ``interrupts.storm``'s count stays low) and that no listing of the
candidate's processes shows.

A. **TCP internal pacing** (``tests/cheats/round27_paces_its_sockets_through_the_oracles_window.py``, CLOSED after
   this round: a candidate's worker may not make a socket of a network family, runners/syscalls.py). A TCP
   socket with ``SO_MAX_PACING_RATE`` is paced by the kernel (no fq qdisc needed): each packet of its send queue leaves
   from the socket's pacing timer, a soft hrtimer pinned to the core that armed it, and on loopback the packet's whole
   path (transmit, the peer's receive, its ACK, the sender's processing of the ACK) runs in softirq on that core. An
   unprivileged worker holds N loopback connections to a listener of its own (TCP_MAXSEG 500, 4 MB buffers, the peer
   never reads while stopped) and queues RATE x T on each just before it is stopped: the kernel sends it, packet by
   packet, while every thread of the candidate is stopped. Nothing runs in its threads (``stopped.ran_since`` empty),
   ``armed.could_slow`` counts timers, timerfds, rings, aio and processes (a socket is none), and soft hrtimers due
   together expire in one interrupt, the softirq running long under load: 3000 connections at 100 kB/s made a busy
   loop on their core 1.6-2.1x slower over 150 ms at 5.0-8.3 interrupts a ms (6 runs; 1000 at MSS 88: 3.0-3.2x at
   15-16 a ms), the softirq time on that core 33-70 % (``/proc/stat``), the other core idle. What the kernel sends is
   the senders' first window (about 4.4 kB each, ``ss -ti``), spread by the pacing timer; the rest waits on the peers'
   receive windows. ``storm`` allows
   5 + 2 x min(the candidate's own rate, 5): a candidate whose own rounds take 1.6 a ms or more (round 24's helper
   sleeping 1 us on the other core: about 40, counted as 5) passes a flood of 8 a ms (against a quiet candidate,
   0.5 a ms, the allowance is 6: half the runs above would be flagged). At the judge the cheat is NOT credited, but
   only by ``storm``'s cap (``test_a_paced_flood_is_refused_or_flagged``): the flood is held to the oracle's window
   (each sender's next departure pushed out by one packet sent at a low rate, EDT; the peers' windows opened ahead by
   traffic in the worker's start-up; round 24's helper lifting its own rounds to 30-36 a ms, counted as 5): 6000
   senders slowed the oracle's counted rounds to 83-102 ms against 38, flagged at 16.6 a ms; 5000: 74-98 ms, flagged
   at 15.9 and 19.3 a ms (a third run's second flood missed); 4000: 63 and 117 ms at 13.1 a ms, unflagged, the clock
   seeing 1.49x, and a forged 2.53x refused only as above 1.49 x 1.58 (a forged 2.0x would have been credited about
   2.0x: not run). The flood's interrupts grow with its work (about 0.2 a ms per ms of softirq lost), so below 15 a ms
   it buys up to about 1.5-1.7x of the oracle's window unflagged, with the stand-in's tolerance about 2.3x of credit.
   Fix (runners/interrupts.py, runners/judge_clock.py):
   measure what the oracle lost rather than interrupts: the oracle's own CPU time over its timed request
   (``/proc/PID/task/TID/schedstat`` run time, or ``getrusage`` of its thread) against the wall time, and the softirq
   and irq time of ``/proc/stat``'s per-cpu lines over its window (softirq ticks on its core: 4-7 of 15 here, 0
   idle; ``/proc/softirqs`` NET_RX/HRTIMER per core as a cross-check), flagging a round where either is more than a
   few % of the window against the candidate's; or count the candidate's sockets with queued data
   (``/proc/net/tcp`` ``tx_queue``/timer of the inodes in its tables, and sockets in flight or orphaned through
   ``ss -tie`` by uid) and refuse paced or backlogged ones; or kill the candidate's connections (a network namespace
   per candidate torn down before the oracle's round is not possible while it lives: give it a namespace of its own
   with only ``lo`` and no way to reach the oracle's, and have the judge read that namespace's ``/proc/net/snmp``
   ``OutSegs`` before and after the oracle's round: any segment sent while it was stopped refuses it).

B. **Keepalive timers** (passing, no hole at this size). TCP keepalive timers (``TCP_KEEPIDLE``/``TCP_KEEPINTVL`` 1 s, the
   least) are timer-wheel timers: batched into the tick, no interrupt of their own; 8000 connections cost the loop's
   core about 10 ms a s (3 softirq ticks in 3 s), spread over the wheel's slots, with no stall over 13 ms: under 1.3x on
   any 40 ms window, and RLIMIT_NOFILE bounds the connections (2 descriptors each).

C. **Page-cache writeback** (measured, no test: 600 MB of disk writes is no unit test; no hole on this machine). 600 MB
   dirtied by the candidate and written back by the flushers (kworkers of an unbound workqueue) while it is stopped: the
   writeback ran on the idle core (17-19 ticks of system time there), the loop's core 1.02-1.05x, 0.65 interrupts a ms
   (virtio completes in few interrupts). On a machine whose every core is busy the kworker shares the oracle's core: not
   measured here (the stand-in leaves one core idle). ``dirty_background_ratio`` (10 % of 24 GB) is not reached by a
   candidate within its memory limit, and the periodic flush (``dirty_expire_centisecs`` 30 s, woken every 5 s) cannot
   be aimed at a 40 ms window.

Runs on the timed CPU stand-in: one judge subprocess for A's two evaluations (about 20 s on 2 cores, the workers'
start-up included), and unit tests of a few seconds (the file about 25-30 s).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import CHEATS
from test_judge_attacks_round4 import _timed_judge
from test_judge_attacks_round24 import _stub

from runners import interrupts as machine_irqs
from runners import syscalls
from runners.armed import could_slow
from runners.stopped import ran_since

CHEAT = "round27_paces_its_sockets_through_the_oracles_window.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 38 ms on the stand-in (rounds 21-25)
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = 2.5
RUNS = 2


def _source(pace: str) -> str:
    text = (CHEATS / CHEAT).read_text()
    for key, value in {"PACE": pace, "CLAIM": str(CLAIM), "SOCKETS": "5000", "RATE": "100000", "MSS": "200", "WARM": "4",
                       "LAG": "0.005", "SPAN": "1.0", "HOLD": "yes", "INFLATE": "yes"}.items():
        text = text.replace(f"@{key}@", value)
    return text


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> list[dict]:
    return _timed_judge(rms_bundle, tmp_path_factory.mktemp("round27"),
                        [(_source("tcp"), "verify", 71 + k, NUMBERS) for k in range(RUNS)], SYMBOLS, one_thread=True)


def _credited(ev: dict) -> float | None:
    return max(s or 0.0 for s in ev["speedups"]) if ev["ok"] else None


def _seen(evs: list[dict]) -> str:
    return "; ".join(f"{ev['stage']} ok={ev['ok']} speedups {ev['speedups']} judge ratios {ev['judge_ratios']} "
                     f"walls (ms, oracle then candidate) {ev['window_ms']} irq/ms (oracle) "
                     f"{[[q.get('irq') for q in p or []] for p in ev['parts'] or []]} {ev['messages']} "
                     f"{ev['error'][:160]}" for ev in evs)


def test_a_paced_flood_is_refused_or_flagged(runs):
    """The cheat (5000 senders held to the oracle's window, its own rounds inflated) earns no credit: its floods cost
    15.9-19.3 interrupts a ms, over ``storm``'s cap of 15 (or a flood misses, and the clock sees no speedup)."""
    credited = [_credited(ev) for ev in runs]
    assert all(c is None or c <= 1.25 for c in credited), f"credited {credited}: {_seen(runs)}"


# a stand-in for the candidate's worker: COUNT loopback connections (MSS, 4 MB buffers, the peer never reads), each
# sender paced at RATE bytes a second, made on one core; on "g" from stdin it queues BYTES on each (the kernel sends
# them from the pacing timer and the softirq that follows), then says "q" and waits to be stopped
_SOCKETS = r"""
import os, socket, sys, time
count, core, rate, nbytes, mss, keepalive = (int(x) for x in sys.argv[1:7])
os.sched_setaffinity(0, {core})
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
ls.bind(("127.0.0.1", 0))
ls.listen(4096)
keep = []
for _ in range(count):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
    if rate:
        c.setsockopt(socket.SOL_SOCKET, 47, rate)  # SO_MAX_PACING_RATE: TCP's internal pacing
    if keepalive:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for opt in (socket.TCP_KEEPIDLE, socket.TCP_KEEPINTVL):
            c.setsockopt(socket.IPPROTO_TCP, opt, 1)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 100)
    c.connect(ls.getsockname())
    s, _ = ls.accept()
    c.setblocking(False)
    keep += [c, s]
os.write(1, b"%d\n" % os.getpid())
if os.read(0, 1) == b"g":
    data = b"x" * nbytes
    for c in keep[::2]:
        try:
            c.send(data)
        except OSError:
            pass
os.write(1, b"q\n")
time.sleep(120)
"""


def _loop_rate(seconds: float) -> float:
    t, n = time.perf_counter(), 0
    while time.perf_counter() - t < seconds:
        for _ in range(300):
            pass
        n += 1
    return n / (time.perf_counter() - t)


def _softirq_ticks(core: int) -> int:
    """The core's softirq ticks in /proc/stat, and the ticks of its ``ksoftirqd`` thread, which runs the softirqs the
    kernel defers when they come faster than it serves them at the interrupt's exit (a loaded CI machine: one tick in
    /proc/stat over a flood that took 39 % of the core)."""
    ticks = -1
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{core} "):
                ticks = int(line.split()[7])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/comm").read().strip() == f"ksoftirqd/{core}":
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return ticks


def _stopped_sockets(count: int, rate: int, nbytes: int, mss: int, keepalive: int, seconds: float) -> dict:
    """The stand-in made on this test's core; a quiet loop rate taken; the data queued; the stand-in stopped as the
    judge stops a candidate; the loop over ``seconds`` beside it; what the judge's checks read."""
    core = sorted(os.sched_getaffinity(0))[0]
    mask = os.sched_getaffinity(0)
    proc = subprocess.Popen([sys.executable, "-c", _SOCKETS, str(count), str(core), str(rate), str(nbytes), str(mss),
                             str(keepalive)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    os.sched_setaffinity(0, {core})
    try:
        line = proc.stdout.readline()
        assert line.strip(), proc.stderr.read().decode(errors="replace")[-2000:]
        pid = int(line)
        quiet = _loop_rate(0.1)
        proc.stdin.write(b"g")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == b"q"
        worker = _stub(pid)
        worker.pause()
        try:
            left = worker.still_running()
            before = worker.cpu_times()
            irq, ticks, t = machine_irqs.total(), _softirq_ticks(core), time.perf_counter()
            loud = _loop_rate(seconds)
            rate_ms = machine_irqs.per_ms(irq, machine_irqs.total(), (time.perf_counter() - t) * 1e6)
            ticks = _softirq_ticks(core) - ticks
            after = worker.cpu_times()
            seen = {"still running": left, "could_slow": could_slow(before), "ran_since": ran_since(before, after)}
        finally:
            worker.resume()
        quiet = max(quiet, _loop_rate(0.1))
    finally:
        os.sched_setaffinity(0, mask)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return {"slower": quiet / loud, "irq_ms": rate_ms, "softirq_ticks": ticks, **seen}


@pytest.fixture(scope="module")
def paced() -> dict:
    """A's mechanism: 3000 senders paced at 100 kB/s (MSS 500) queued just before their holder is stopped, the loop
    beside them over the next 150 ms (the oracle's window is about 40)."""
    return _stopped_sockets(3000, 100_000, 15_000, 500, 0, 0.15)


def test_a_candidate_worker_cannot_make_the_paced_sockets():
    """A closed: what the stand-in above does (1.6-2.1x of the core beside it at 5.0-8.3 interrupts a ms, with nothing
    running in it, ``could_slow`` silent and under ``storm``'s allowance for a candidate whose own rounds took 5 a ms)
    needs TCP sockets, which a candidate's worker may not make (runners/syscalls.py: EACCES for a socket of a network
    family, in its process and everything it starts); a unix socket pair it may."""
    proc = subprocess.run([sys.executable, "-c", _SOCKETS, "4", str(sorted(os.sched_getaffinity(0))[0]), "100000",
                           "15000", "500", "0"], capture_output=True, text=True, timeout=60, preexec_fn=syscalls.install,
                          check=False)
    assert proc.returncode != 0 and "PermissionError" in proc.stderr, (proc.returncode, proc.stderr[-1500:])
    unix = subprocess.run([sys.executable, "-c", "import socket; a, b = socket.socketpair(); a.send(b'x'); "
                           "print(b.recv(1))"], capture_output=True, text=True, timeout=60,
                          preexec_fn=syscalls.install, check=False)
    assert unix.stdout.strip() == "b'x'", unix.stderr[-1500:]


def test_a_paced_flood_shows_in_its_cores_softirq_time(paced):
    """What the fix would read: the flood's work is the core's softirq time in /proc/stat, or its ksoftirqd thread's
    where the kernel deferred it (5-7 ticks of 10 ms over the 150 ms here, 0 in the keepalive test's 1.1 s), whatever
    the interrupt count."""
    assert paced["softirq_ticks"] >= 2, paced


def test_keepalive_timers_of_a_stopped_candidate_cost_its_core_little():
    """B: 3000 connections probing every second (TCP_KEEPIDLE/INTVL 1 s, the least): timer-wheel timers batched into
    the tick, each probe and its ACK a few us in softirq; over 1.1 s (a probe round included) the loop beside them
    loses under 1.3x (about 1.01x measured; 8000 connections: 10 ms a s)."""
    got = _stopped_sockets(3000, 0, 0, 500, 1, 1.1)
    assert got["slower"] < 1.3, got
