"""The search loop and the tuner over a synthetic fitness landscape (no kernels run here)."""
import random

from conftest import EXAMPLE
from evolver.archive import Archive
from evolver.candidate import Candidate
from evolver.loop import evolve
from evolver.operators import LaunchTuner
from runners.results import CaseResult, Evaluation

SILU = (EXAMPLE / "tinyserve/kernels/activation.py").read_text()


def landscape(candidate: Candidate) -> Evaluation:
    """Faster with more warps and BLOCK_N=4096; num_stages=4 is 'incorrect'."""
    src = candidate.source
    if "num_stages=4" in src:
        return Evaluation(stage="correctness", error="wrong")
    speed = 1.0 + 0.1 * ("num_warps=8" in src) + 0.2 * ("BLOCK_N=4096" in src)
    return Evaluation(stage="done", ok=True, timed=True,
                      cases=[CaseResult("c", correct=True, baseline_us=10.0, candidate_us=10.0 / speed)])


def run(budget, seed=0):
    archive = Archive()
    baseline = Candidate(0, SILU, "baseline")
    baseline.evaluation = landscape(baseline)
    archive.add(baseline)
    seen = []
    summary = evolve(archive, LaunchTuner(SILU), landscape, budget, random.Random(seed), seen.append)
    return archive, summary, seen


def test_search_finds_the_optimum_within_budget():
    archive, summary, seen = run(budget=40)
    assert summary.evaluated == len(seen) == 40
    best = archive.best()
    assert abs(best.fitness - 1.3) < 1e-9
    assert "BLOCK_N=4096" in best.source and "num_warps=8" in best.source
    assert summary.failures > 0  # num_stages=4 was tried and recorded as a failure, not lost


def test_no_duplicate_is_evaluated_and_the_space_can_run_out():
    archive, summary, _ = run(budget=1000)
    keys = [c.sha256 for c in archive.candidates]
    assert len(keys) == len(set(keys))
    assert summary.exhausted and summary.evaluated < 1000
    space = 1
    for knob in LaunchTuner(SILU).knobs:
        space *= len(knob.choices)
    assert len(archive) <= space


def test_same_seed_same_search():
    a, _, _ = run(budget=10, seed=7)
    b, _, _ = run(budget=10, seed=7)
    assert [c.source for c in a.candidates] == [c.source for c in b.candidates]
