"""Attacks on the judge, twenty-first round: the two changes of the day.

A. **The judge's clock paired by round** (runners/corroboration.py ``corroborate``): the candidate's pass is the
   oracle's pass (now the median of its passes, where it was their shortest) plus the median of the counted rounds'
   wall differences; the allowance follows the oracle's extras alone. Three rounds, the first dropped: two counted,
   and the median of two is their mean. One oracle round slowed k times moves the oracle's pass and the rounds'
   difference by half of it each and reads as a speedup of about (k + 1) / 2, while the oracle's extra, whose spread
   is the allowance, moves little (the slowdown is mostly in its pass). The estimator before ignored one slowed
   oracle round (the shortest pass, the shortest candidate wall).

   How a candidate slows one oracle round: the judge stops it (SIGSTOP to its worker's group) and starts the oracle
   at once, never checking that it stopped. A task inside a long shmem write, or asleep on the file's lock that such a
   task holds, is not stopped until it returns to user mode (a read of a memfd's holes, tried too, does stop):
   ``tests/cheats/round21_keeps_running_in_the_kernel_while_stopped.py`` (open; the weight its session needs against
   the oracle's on this 2-core machine, autogroup, is root's here) and, on a GPU, device work queued before the pause
   (round 7). Without the chains the same claim (2.5x for a copy of the baseline) was quarantined in the runs tried
   here (a claim of 2.0x once passed on the stand-in's noise alone); with them, five runs in six credited it.
   **Closed**: the judge's clock waits until every thread of the candidate's group (and user) shows as stopped in
   /proc, refusing one that does not stop within 2 s (runners/stopped.py, ``_alone(settled=True)``); and the oracle's
   pass is its shortest again, the rounds' difference the upper median (of two counted rounds, the one less
   favourable to the candidate), besides the verification's seven rounds (six counted) and the search's four.

   Tried, not found: a very fast round of its own (every slot of a round is shown or opened, and checked: the
   candidate cannot make its own wall shorter than its work); position effects (the two counted rounds have the two
   orders, so what the first or second place costs cancels in their mean).

B. **A quarantine re-checked** (runners/judge.py ``evaluate``): after a ``Quarantine`` the judge releases the workers
   and runs ``recheck``; a correctness refusal replaces the quarantine, and any other exception is swallowed.
   ``tests/cheats/round21_answers_late_in_the_recheck.py`` (open): a forged claim to be quarantined, then a re-check
   answer timed just before the evaluation's deadline, so that the deadline falls while the judge waits for the
   oracle: the PeerTimeout is swallowed, the sandbox never replaces the oracle it caught mid-request
   (``_restart_oracle_if_busy``), and the next evaluation reads the stale reply out of turn: stage ``baseline``.
   **Closed**: the re-check lets everything but a ``Refusal`` through to the sandbox, and the sandbox replaces an
   oracle left mid-request after any evaluation.

   Tried, not a gain: a candidate wrong once timed that dies or hangs in the re-check keeps the quarantine (the
   verdict it had before this change; every refusal scores alike in the search, evolver/archive.py); a right one
   stays quarantined (the late answerer is right, and refused).

Runs on the timed CPU stand-in (tests/test_judge_attacks.py ``_SHIM``, torch one thread a worker), one judge
subprocess for every evaluation of the module.
"""
from __future__ import annotations

import json
import os
import statistics

import pytest
from conftest import CHEATS
from test_judge_attacks_round4 import _timed_judge

from runners.corroboration import corroborate, credit_cap

CHAINS = "round21_keeps_running_in_the_kernel_while_stopped.py"
LATE = "round21_answers_late_in_the_recheck.py"
SYMBOLS = {"T": 16, "H": 256}  # a pass of about 50 ms on the stand-in, ten times the extra around it
NUMBERS = {"max_slots": 2, "max_window_slots": 2, "reveal_slots": 2, "min_rounds": 10, "max_rounds": 10}
CLAIM = 2.5  # the forged claim: the stand-in's clock saw an honest copy at up to 1.3x, the chains gave 1.9-5.7x
DEADLINE_S = 15.0  # the late answerer's evaluation: long enough to reach its re-check on a loaded machine

def _source(name: str, **marks: str) -> str:
    text = (CHEATS / name).read_text()
    for key, value in marks.items():
        text = text.replace(f"@{key}@", value)
    return text


def _judge(bundle, tmp_path, runs: list) -> list[dict]:
    """(source, seed, numbers) each under the full protocol, on round 4's judge of their own (torch one thread a
    worker)."""
    return _timed_judge(bundle, tmp_path, [(source, "verify", seed, numbers) for source, seed, numbers in runs],
                        SYMBOLS, one_thread=True)


ARMED_RUNS = 2  # the slowed round landed in about five runs of six before the fix: any run credited would show it


@pytest.fixture(scope="module")
def runs(rms_bundle, tmp_path_factory) -> dict:
    armed = _source(CHAINS, ARMED="armed", CLAIM=str(CLAIM), NICE="-8", MB="256", PER_CHAIN="6")
    late = _source(LATE, TIMEOUT=str(DEADLINE_S))
    results = _judge(rms_bundle, tmp_path_factory.mktemp("round21"), [
        *[(armed, 5 + k, NUMBERS) for k in range(ARMED_RUNS)], (late, 7, {**NUMBERS, "timeout": DEADLINE_S}),
        ("BASELINE", 8, NUMBERS)])
    return {"chains": results[:ARMED_RUNS], "late": results[ARMED_RUNS], "next": results[ARMED_RUNS + 1]}


def _both_clocks(ev: dict) -> str:
    """The paired clock's and the estimator before's view of the same rounds (a diagnosis, not asserted)."""
    walls, parts = ev["window_ms"][0], ev["parts"][0]
    if not walls or not parts:
        return "no window"
    walls_b, walls_c = walls[:3][1:], walls[3:][1:]
    passes = [p["pass"] for p in parts][1:]
    checks = min(statistics.median(p.get("checks", 0.0) for p in parts[1:]), 0.5 * min(passes))
    extras = [w - q for w, q in zip(walls_b, passes)]
    paired_b = statistics.median(passes) - checks
    paired = paired_b / max(paired_b + statistics.median(c - b for b, c in zip(walls_b, walls_c)), paired_b / 10)
    before_b = min(passes) - checks
    before = before_b / max(min(walls_c) - statistics.median(extras) - checks, before_b / 10)
    return f"walls (ms) oracle {walls[:3]}, candidate {walls[3:]}: paired clock {paired:.2f}x, before {before:.2f}x"


# ---- A. one oracle round slowed ---------------------------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="the chains' session weight (autogroup nice) needs CAP_SYS_NICE here")
def test_a_worker_left_running_in_the_kernel_cannot_slow_one_oracle_round_into_a_speedup(runs):
    credited = [max(s or 0.0 for s in ev["speedups"]) if ev["ok"] else None for ev in runs["chains"]]
    assert all(c is None or c <= 1.25 for c in credited), \
        f"credited {credited}; " + "; ".join(_both_clocks(ev) for ev in runs["chains"])


def test_one_slowed_oracle_round_moves_the_paired_clock_by_half_of_it():
    """The arithmetic of A on numbers like the stand-in's (microseconds, the H200's tolerance): a parity kernel, two
    counted rounds, the oracle's second round four times as long (its pass and its extra alike). The paired clock with
    the plain median read 2.9x, within 16 % of the claimed 2.5x, and credited the claim (the estimator before it: 1.16x);
    with the oracle's shortest pass and the upper median of the differences it reads parity and quarantines it."""
    walls_b, passes_b = [50_000.0, 200_000.0, 50_000.0], [46_000.0, 184_000.0, 46_000.0]
    walls_c = [50_000.0, 50_500.0, 49_500.0]
    v = corroborate(walls_b, passes_b, walls_c, 100.0, 40.0, 0.05, 150.0, [500.0] * 3, 2)
    if v.ok:  # the claim of 2.5x was corroborated: it must at least not be credited beyond parity
        assert credit_cap(v, 0.05) <= 1.1, (v, "credited", credit_cap(v, 0.05))


# ---- B. the re-check after a quarantine -------------------------------------------------------------------------

def test_the_late_answerer_is_refused(runs):
    ev = runs["late"]
    assert not ev["ok"], json.dumps(ev)[:800]


def test_a_timeout_in_the_recheck_after_a_quarantine_leaves_the_next_evaluation_working(runs):
    # what is asserted is that the next evaluation meets a working oracle: the baseline against itself on the stand-in's
    # clock (two counted rounds) may still be quarantined on its noise now and then, which is not this hole
    ev = runs["next"]
    assert ev["stage"] != "baseline" and "out of turn" not in ev["error"], \
        f"the evaluation after the late answerer: {json.dumps(ev)[:800]}"
    assert ev["ok"] or ev["stage"] == "timing", json.dumps(ev)[:800]
