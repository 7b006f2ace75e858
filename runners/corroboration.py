"""The judge's clock against a worker's claim: how far a claimed speedup may exceed what the judge's own clock saw
over its window, and how much of a speedup is credited (pure arithmetic on microseconds; the window itself is
runners/judge_clock.py)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import CaseResult

MAX_PLAUSIBLE_SPEEDUP = 10.0
# How far a request's host work per slot can differ between the oracle's process and the candidate's, in
# microseconds per slot of the window. The judge measures the extra on the oracle only. On the H200 the two sides
# running the same kernel were 3-4 ms apart, either way, over 8192 slots (Liger's swiglu and geglu at their tests'
# smallest calls, an 8 ms pass), while the oracle's own extras moved by 1 ms; at 731 slots of a 3 ms pass (LayerNorm,
# M=512) within 0.5 ms. That was with the commitments in the timed reply as a JSON list (on a CPU about 0.2 us a
# slot to list, encode and decode: 1.7 ms at 8192). They now travel as one digest (runners/commitments.py ``digest``),
# the per-slot hashes after the clock; what stays per slot in the request is device work (the copy of each slot's
# outputs, measured in the oracle's ``commit_us``). Lowered from 0.5 when the list left; re-measured on the H200
# since (bench/results/evaluator-h200/session5/call2-diag.txt, call4-diag.txt): at most 0.17 us a slot. The H200
# data of tests/test_corroboration.py (the baseline against itself, taken with the list) needs 0.36 or more.
# Where this, with the extra's own movement, is half a pass or more, the size is unresolved and credited no
# speedup.
CROSS_PROCESS_US_PER_SLOT = 0.4


def counted(rounds: list) -> list:
    """The rounds of the judge's clock that count: the first is a warm-up (first-use costs in a fresh process), left
    out where there are three or more (every per-round list of a measurement is cut alike: they have one length)."""
    return rounds[1:] if len(rounds) >= 3 else rounds


@dataclass
class Corroboration:
    claimed: float  # the candidate's claimed speedup (sample medians)
    judge_speedup: float  # by the judge's clock
    allowed: float  # how far the claim may exceed the judge's speedup
    ok: bool
    resolved: bool = True  # the clock's noise is small against the pass: its speedup can be credited
    credit_speedup: float | None = None  # by the judge's clock, as if the candidate had skipped the lead sleep


def corroborate(walls_b: list[float], passes_b: list[float], walls_c: list[float], baseline_us: float,
                candidate_us: float, tolerance: float, jitter_us: float,
                shaveable_b: list[float] | None = None, slots: int = 0,
                leads_b: list[float] | None = None, checks_b: list[float] | None = None) -> Corroboration:
    """Hold the candidate's claimed speedup against the judge's clock.

    ``walls_*`` are the judge's wall times of each side's window requests (microseconds), ``passes_b`` the
    trusted oracle's own device time of its passes. A request's wall time carries an extra beyond the pass
    (lead sleep, filling the slots, commitments, the round trip), measured on the oracle; the candidate's pass
    by the judge's clock is the oracle's shortest pass plus the (upper) median, over the rounds, of how much longer the
    candidate's request took than the oracle's in the same round. The first round is a warm-up (first-use costs in a fresh
    process) and is left out when there are three or more.

    The allowance is the tolerance plus what the judge cannot resolve: how much the oracle's extra moved, how far
    it can differ in another process (``CROSS_PROCESS_US_PER_SLOT`` times ``slots``), and the part
    of it a candidate's worker could leave out of its own request (``shaveable_b``: the oracle's lead sleep and
    commitments; the whole extra when not given), relative to the oracle's pass. When the extra moves by half a
    pass or more, or the candidate's pass comes out at less than a tenth of the oracle's, the clock has not
    resolved this size (``resolved`` False): the judge then credits no speedup at all (runners/judge_clock.py).

    ``checks_b``: the device time of the judge's checkpoints in a pass (runners/checkpoints.py), measured alone on
    the oracle with the candidate stopped; both sides' passes carry the same checkpoints, and the rounds' smallest is
    taken off both, so that they do not draw the clock's speedup towards 1 (at most half the oracle's pass).
    """
    walls_b, passes_b, walls_c, shaveable_b, leads_b, checks_b = (
        counted(x) if x else x for x in (walls_b, passes_b, walls_c, shaveable_b, leads_b, checks_b))
    extras = [w - q for w, q in zip(walls_b, passes_b)]
    extra = statistics.median(extras)
    # the smallest: a disturbed measurement only lengthens it (round 24)
    checks = min(max(min(checks_b), 0.0), 0.5 * min(passes_b)) if checks_b else 0.0
    # the oracle's shortest pass: a disturbed round only lengthens it (a candidate that kept running while stopped
    # slowed one oracle round fourfold, round 21)
    pass_b = max(min(passes_b) - checks, 1e-3)
    floor = pass_b / MAX_PLAUSIBLE_SPEEDUP
    # Paired by round: the candidate's pass is the oracle's pass plus how much longer the candidate's request took
    # than the oracle's in the same round, the upper median over the counted rounds. The extra around a pass moves
    # from round to round for both sides alike (the window's fill and commitment, the device's state after the judge's
    # checks: on the H200 both sides' walls were 14.8 ms in one round and 12.0 in the next, sixteenth session); the
    # shortest candidate wall less the median extra (the estimator before) read two identical kernels at 0.45-1.76x.
    # Upper: of an even count, the round less favourable to the candidate (of two counted rounds the plain median is
    # their mean, and one oracle round slowed k times read as a speedup of (k + 1) / 2, round 21).
    diffs = [c - b for b, c in zip(walls_b, walls_c)]
    pass_c = pass_b + statistics.median_high(diffs)
    # how much the trusted oracle's extra moves (never the rounds' differences: the candidate's walls are its own to
    # make noisy, and a noisy candidate widened the allowance until a hidden slowdown passed, round 3); from one round
    # it cannot be told, and the extra itself stands in for it; and how far the candidate's process may differ from
    # the oracle's in its host work per slot (CROSS_PROCESS_US_PER_SLOT)
    noise = (max(extras) - min(extras) if len(extras) >= 2 else extra) + jitter_us + CROSS_PROCESS_US_PER_SLOT * slots
    shave = statistics.median(shaveable_b) if shaveable_b else extra
    resolved = noise < 0.5 * pass_b and pass_c >= floor
    judge_speedup = pass_b / max(pass_c, floor)
    allowed = tolerance + (shave + noise) / pass_b
    claimed = baseline_us / candidate_us if candidate_us else float("inf")
    # The credit never counts time the candidate's worker could have left out of its own request: the lead sleep
    # is its own to run or skip (tests/cheats/sheds_the_window_extra.py skipped it and was credited 1.17x on the
    # H200), so the credited pass is the candidate's wall minus the oracle's extra without its lead. An honest
    # candidate loses the lead against its pass (Protocol.window_lead_cycles keeps that small).
    lead = statistics.median(leads_b) if leads_b else 0.0
    credit = pass_b / max(pass_c + lead, floor)
    return Corroboration(claimed, judge_speedup, allowed, claimed <= judge_speedup * (1 + allowed), resolved, credit)


def credit_cap(verdict: Corroboration, tolerance: float) -> float:
    """The most speedup a case is credited: what the judge's clock saw, plus its tolerance, where the clock
    resolves the size (below 1.0x too: a floor of 1.0 let a case the clock saw at 0.87x be credited parity within
    the allowance); 1.0 where it cannot."""
    seen = verdict.judge_speedup if verdict.credit_speedup is None else min(verdict.judge_speedup,
                                                                            verdict.credit_speedup)
    return seen * (1 + tolerance) if verdict.resolved else 1.0


def implausible(result: CaseResult, peak_gbs: float, l2_bytes: int, max_speedup: float = MAX_PLAUSIBLE_SPEEDUP) -> str:
    """Why a timed result is too good to be believed ('' when it is plausible). Bandwidth is held against the
    measured DRAM peak only when the data cannot sit in L2."""
    if result.speedup and result.speedup > max_speedup:
        return f"{result.case}: speedup {result.speedup:.1f}x is above the plausibility bound {max_speedup:g}x"
    if result.bytes_moved and result.bytes_moved > l2_bytes and result.bandwidth_gbs and \
            result.bandwidth_gbs > 1.1 * peak_gbs:
        return (f"{result.case}: effective bandwidth {result.bandwidth_gbs:.0f} GB/s is above the measured "
                f"peak {peak_gbs:.0f} GB/s")
    return ""
