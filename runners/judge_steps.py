"""The order of the judge's steps for one candidate (``evaluate``): correctness per case, then (where the backend
is timed) the timing with the judge's clock, the own-kernel share, the re-check after timing and plausibility; and
what a quarantine still gets (the re-check: a kernel wrong once timed is refused as wrong). The steps themselves are
``runners.judge.Judge``'s."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .judge_clock import implausible
from .protocol import Quarantine, Refusal
from .results import CaseResult, Evaluation
from .task import Case

if TYPE_CHECKING:
    from .judge import Judge


def claimed_faster(results: list[CaseResult]) -> set[int]:
    """The cases where the candidate's timed result is faster than the baseline's."""
    return {i for i, r in enumerate(results) if r.speedup is not None and r.speedup > 1.0}


def profiled_cases(faster: set[int], count: int, every: bool) -> list[int]:
    """Where the own-kernel share is taken: every case (torch may hide at any size), or, while screening, the
    cases where the candidate claims a speedup (elsewhere it gains nothing; the champion is re-run with every
    case profiled)."""
    return list(range(count)) if every else sorted(faster)


def recheck(judge: Judge, cases: list[Case], secret: int) -> None:
    """Every case again after the timing: a later trial's inputs, not trial 0's plain ones, and the padded layouts
    where the protocol says (corner cuts taken only once timed were right on those and passed, round 17)."""
    for index, case in enumerate(cases):
        judge.check_case(case, index, secret + 1, 2, CaseResult(case=case.id), first=1,
                         layouts=judge.p.recheck_layout, masks=False)


def evaluate(judge: Judge, cases: list[Case], secret: int, trials: int, time_it: bool, reference: bool,
             ev: Evaluation, peak: tuple[float, int] | None) -> Evaluation:
    """The whole protocol for one candidate; ``ev`` arrives with stage 'correctness'."""
    mark = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        ev.phases[name] = ev.phases.get(name, 0.0) + now - mark
        mark = now

    try:
        for index, case in enumerate(cases):
            result = CaseResult(case=case.id)
            ev.cases.append(result)
            judge.check_case(case, index, secret, trials, result)
            result.correct = True
        phase("correctness")
        if time_it and judge.backend.timed:
            ev.stage = "timing"
            try:
                for index, (case, result) in enumerate(zip(cases, ev.cases)):
                    judge.time_case(case, index, secret, result)
                    result.bandwidth_gbs = result.bytes_moved / (result.candidate_us * 1e-6) / 1e9
                    phase("timing")
                    # torch.compile compiles once per shape: the peer column is timed at the configured shapes only,
                    # not at every call captured from the repository's tests (a baseline check stayed minutes in it)
                    if reference and judge.spec.reference and case.origin == "config":
                        judge.reference_time(case, index, secret, result)
                        phase("torch.compile")
                judge.spot_check(secret)
                phase("timing")
            except Quarantine as quarantine:
                # A wrong kernel is reported as wrong: the re-check runs before the clocks' disagreement is the
                # verdict (on a noisy clock a corner cut taken once timed was quarantined, not found wrong)
                try:
                    judge.release()
                    recheck(judge, cases, secret)
                except Refusal as wrong:  # a re-check refused otherwise leaves the quarantine as the verdict
                    if wrong.stage == "correctness":
                        raise Refusal("correctness", f"{wrong.reason} (its timing was quarantined too: "
                                                     f"{quarantine.reason})") from None
                # anything else (a worker past the deadline, a broken channel) goes on to the sandbox, which replaces
                # an oracle caught mid-request: swallowed here, the oracle's late reply sank the next evaluation
                # (tests/test_judge_attacks_round21.py)
                raise quarantine from None
            faster = claimed_faster(ev.cases)
            for index in profiled_cases(faster, len(cases), judge.p.profile_every_case):
                judge.own_kernel_share(cases[index], index, secret, ev.cases[index])
            judge.release()
            phase("profile")
            # A candidate that behaves while checked and cuts corners once the calls pile up is caught here (while
            # screening, only a candidate that claims a speedup somewhere has anything to gain from that).
            if judge.p.window_every_case or faster:
                recheck(judge, cases, secret)
            phase("recheck")
            if peak:
                for result in ev.cases:
                    reason = implausible(result, *peak)
                    if reason:
                        raise Refusal("plausibility", f"quarantined: {reason}")
            ev.timed = True
        elif not judge.backend.timed:
            ev.notes.append("not timed: the Triton CPU interpreter runs kernels as numpy on the host; its times "
                            "say nothing about GPU speed")
        ev.stage, ev.ok = "done", True
    except Refusal as refusal:
        ev.stage, ev.error = refusal.stage, refusal.reason
        current = next((c for c in reversed(ev.cases)), None)
        if current is not None and refusal.stage in ("correctness", "compile", "kernel") and \
                not refusal.reason.startswith(tuple(f"{c.case}:" for c in ev.cases)):
            ev.error = f"{current.case}: {refusal.reason}"
            current.message = refusal.reason
    finally:
        ev.phases.update(judge.spent)
        try:
            judge.exchange.clear()
        except OSError:
            pass
    return ev
