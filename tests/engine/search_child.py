"""A search run as its own process, for the kill -9 test: the tuner over a synthetic landscape (each
evaluation takes a moment), everything in the run store given on the command line.

    python search_child.py RUN_DIR BUDGET [SEED]
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evolver.candidate import Candidate
from evolver.engine import EngineOptions, new_archive, run_search
from runners.results import CaseResult, Evaluation

SILU = (Path(__file__).resolve().parents[2] / "examples/tinyserve/tinyserve/kernels/activation.py").read_text()


class Spec:
    kernel, entry = "silu_and_mul", "silu_and_mul"


class FakeEvaluator:
    """What the engine reads of an evaluator; evaluations come from ``landscape``."""

    spec, baseline, backend = Spec(), SILU, "interpret"


def landscape(candidate: Candidate) -> Evaluation:
    time.sleep(0.15)
    src = candidate.source
    if "num_stages=4" in src:
        return Evaluation(stage="correctness", error="wrong")
    speed = 1.0 + 0.1 * ("num_warps=8" in src) + 0.2 * ("BLOCK_N=4096" in src) + 0.01 * src.count("2")
    return Evaluation(stage="done", ok=True, timed=True,
                      cases=[CaseResult("c", correct=True, baseline_us=10.0, candidate_us=10.0 / speed)])


def main() -> None:
    out, budget = Path(sys.argv[1]), int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    resume = (out / "run.sqlite").exists()
    baseline = Candidate(0, SILU, "baseline")
    baseline.evaluation = Evaluation(stage="done", ok=True, timed=True,
                                     cases=[CaseResult("c", correct=True, baseline_us=10.0, candidate_us=10.0)])
    opts = EngineOptions(budget=budget, in_flight=1, resume_from=out / "run.sqlite" if resume else None)
    engine = run_search(FakeEvaluator(), baseline, opts, out, seed,
                        on_result=lambda c: print(f"evaluated {c.id}", flush=True), archive=new_archive(opts),
                        evaluate=landscape)
    print(f"done {engine.summary.evaluated} {engine.summary.stop}", flush=True)


if __name__ == "__main__":
    main()
