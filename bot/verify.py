"""The verify stage: which candidate, if any, a run may call an improvement.

The search's numbers come from the screening protocol; a candidate over the bar is re-run here under the full
protocol in a fresh process with new seeds, on the held-out cases, and with the repository's own test, and the best
few over the bar are tried in turn before a run says "no improvement".
"""
from __future__ import annotations

import dataclasses
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evolver.archive import Archive
from evolver.candidate import Candidate
from runners.results import Evaluation
from runners.sandbox import Evaluator

from .repo_tests import run_test_with_source

if TYPE_CHECKING:
    from .optimize import OptimizeOptions, Progress, _Job

log = logging.getLogger("kernelsmith")

def verify_candidate(job: _Job, opts: OptimizeOptions, evaluator: Evaluator,
                     champion: Candidate) -> tuple[Evaluation | None, str, dict | None]:
    """Re-check the champion: new process, new seeds, held-out cases, re-timed, the repo's test.

    Returns (verification evaluation, failure reason or '', repo test run)."""
    spec, min_speedup, trials = job.spec, opts.min_speedup, opts.trials
    check = evaluator.evaluate(champion.source, secrets.randbits(62), time_it=True, trials=trials + 2,
                               reference=True)
    if not check.ok:
        return check, f"the champion failed re-verification ({check.feedback})", None
    if check.fitness is None:
        return check, "the champion could not be re-timed (no device timing on this backend)", None
    if check.fitness < min_speedup:
        return check, (f"the best candidate measured {champion.fitness:.3f}x in the search but "
                       f"{check.fitness:.3f}x when re-timed in a fresh process, under the "
                       f"{min_speedup:.2f}x bar"), None
    if spec.held_out:
        held = evaluator.evaluate(champion.source, secrets.randbits(62), time_it=False, case_set="held_out",
                                  trials=trials)
        if not held.ok:
            return check, f"the champion is wrong on a held-out case ({held.feedback})", None
    test = run_test_with_source(job.target, spec.module, champion.source, job.kernel.test, job.backend)
    test_dict = dataclasses.asdict(test)
    if not test.passed:
        return check, f"the repository's test fails with the champion in place:\n{test.output_tail}", test_dict
    return check, "", test_dict


@dataclass
class Decision:
    verdict: str
    reason: str
    shown: Evaluation  # whose per-case rows the report shows
    shown_kind: str  # champion | best_candidate | baseline
    champion: Candidate | None = None
    repo_test: dict | None = None


def decide(job: _Job, opts: OptimizeOptions, archive: Archive, evaluator: Evaluator, progress: Progress) -> Decision:
    baseline, best = archive.candidates[0], archive.best()
    if job.backend == "interpret":
        return Decision("not_timed", NOT_TIMED, baseline.evaluation, "baseline")
    if best is None or best.id == 0 or (best.fitness or 0) < opts.min_speedup:
        reason = (f"No candidate beat the baseline by the required {opts.min_speedup:.2f}x "
                  f"(best: {best.fitness:.3f}x)." if best else "No candidate could be timed.")
        kind = "best_candidate" if best and best.id != 0 else "baseline"
        return Decision("no_improvement", reason, best.evaluation if best else baseline.evaluation, kind)
    progress.stage("verifying the champion", "verify")
    # The best few over the bar, in order: when the best fails the full protocol (a claim the search's screening
    # could not see through, or noise), the next one may still hold, and a run ends with what really verified.
    ranked = sorted((c for c in archive.candidates if c.id != 0 and (c.fitness or 0) >= opts.min_speedup),
                    key=lambda c: c.fitness, reverse=True)
    seen, first = set(), None
    for cand in ranked:
        if cand.sha256 in seen or len(seen) >= VERIFY_TRIES:
            continue
        seen.add(cand.sha256)
        check, failure, repo_test = verify_candidate(job, opts, evaluator, cand)
        shown = check if check and check.cases else cand.evaluation
        if not failure:
            return Decision("improved", "", shown, "champion", champion=cand, repo_test=repo_test)
        log.info("candidate %d failed verification: %s", cand.id, failure[:300])
        first = first or (failure, shown, repo_test)
    failure, shown, repo_test = first
    more = f" ({len(seen) - 1} more above the bar failed too)" if len(seen) > 1 else ""
    return Decision("no_improvement", f"A candidate looked faster, but {failure}{more}", shown, "best_candidate",
                     repo_test=repo_test)


VERIFY_TRIES = 3  # candidates above the bar re-run under the full protocol before a run says no improvement


NOT_TIMED = ("The Triton CPU interpreter (`--backend interpret`) runs kernels as numpy on the host, so its times "
             "say nothing about GPU speed; this run checked correctness only. Run with `--backend triton` on a "
             "GPU to search for speed.")
