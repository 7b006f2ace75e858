"""The PR body's search paragraph for an LLM run: models, calls, tokens, cost, rounds, what each operator did,
what became of torch.compile's seed, and where the winning change came from (operator, parent, evaluation)."""
import json

from test_engine_archive import cand, with_baseline

from bot.report import build_report, render_markdown
from evolver.budget import Counters
from evolver.inductor_seed import SEED, InductorCode, Kernel
from evolver.loop import SearchSummary
from evolver.providers.base import Completion, Usage
from evolver.search_facts import describe_change, rationale, search_facts
from runners.results import CaseResult, Environment, Evaluation
from runners.task import Case, TaskSpec

SPEC = TaskSpec(kernel="softmax", module="pkg/softmax.py", entry="softmax", args=[],
                cases=[Case({"N": 8}, "float16")], reference="ref.py:softmax")
USAGE = [{"model": "claude", "calls": 3, "errors": 1, "input_tokens": 9000, "output_tokens": 2500,
          "cache_read_tokens": 4000, "cache_write_tokens": 1000, "cost": 0.0123, "wins": 1, "children_evaluated": 2},
         {"model": "qwen-local", "calls": 2, "errors": 0, "input_tokens": 7000, "output_tokens": 2000,
          "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": 0.0, "wins": 0, "children_evaluated": 1}]


def llm_run():
    archive = with_baseline(islands=2)
    seed = cand(1, 1.3, island=1)
    seed.genome = {"model": "claude", "attempts": 2, "seed": SEED}
    seed.calls = [Completion("claude", text="Bad diff."),
                  Completion("claude", text="Keep rows in registers; cc @octocat.\n```python\nx = 1\n```\n",
                             usage=Usage(calls=1, output_tokens=10))]
    wrong = cand(2, None, island=0, parent=1, ok=False)
    wrong.operator, wrong.genome = "diff", {"model": "qwen-local", "attempts": 1}
    tuned = cand(3, 1.1, island=0)
    tuned.operator, tuned.genome = "tuner", {"k#0.num_warps": 2}
    for c in (seed, wrong, tuned):
        archive.add(c)
    code = InductorCode(True, "", "ref.py:softmax", "N=8/float16", "cuda", [Kernel("triton_per_fused_0", "...")])
    summary = SearchSummary(3, 1, 2, False, "evaluations", 1, USAGE)
    facts = search_facts(summary, Counters(proposals=6, evaluated=3, elapsed_s=12.34), archive,
                         ["tuner", "rewrite", "diff"], 2, code, {1: 1, 2: 2, 3: 3},
                         {"temperature": 0.6, "top_p": 0.95})
    return archive, seed, facts


def measured(speed: float) -> Evaluation:
    return Evaluation(stage="done", ok=True, timed=True, env=Environment("triton", "NVIDIA H200"), cases=[
        CaseResult("N=8/float16", correct=True, trials=3, baseline_us=10.0, candidate_us=10.0 / speed,
                   baseline_spread=0.01, candidate_spread=0.01, baseline_host_us=5.0, candidate_host_us=5.0,
                   timing_method="cuda-graph")])


def render(archive, champion, facts, verdict="improved"):
    shown = measured(champion.fitness if champion else 1.0)
    report = build_report(spec=SPEC, backend="triton", verdict=verdict, reason="r", shown=shown, champion=champion,
                          changes=[], archive=archive,
                          search={"budget": 3, "evaluated": 3, "failures": 1, "duplicates_rejected": 2,
                                  "exhausted": False, "best_fitness": 1.3, "knobs": ["k#0.num_warps"],
                                  "engine": facts},
                          repo_test={"command": "pytest -q t.py", "passed": True, "duration_s": 1.0,
                                     "with_champion": True} if champion else None,
                          baseline_repo_test=None, trials=3, held_out_cases=0,
                          target={"commit": "a" * 40, "module": SPEC.module}, reproduce="kernelsmith optimize x",
                          notes=[])
    return render_markdown(json.loads(json.dumps(report, default=str)))  # as report.json holds it


def test_facts_add_up_models_and_trace_the_best():
    _, _, facts = llm_run()
    assert facts["llm"]["calls"] == 5 and facts["llm"]["tokens"] == 25500 and abs(facts["llm"]["cost"] - 0.0123) < 1e-12
    assert facts["rounds"] == 3 and facts["elapsed_s"] == 12.3
    assert facts["by_operator"] == {"rewrite": {"evaluated": 1, "correct": 1, "best_fitness": 1.3},
                                    "diff": {"evaluated": 1, "correct": 0, "best_fitness": None},
                                    "tuner": {"evaluated": 1, "correct": 1, "best_fitness": 1.1}}
    origin = facts["best_origin"]
    assert origin["id"] == 1 and origin["parent_id"] == 0 and origin["found_at_evaluation"] == 1
    assert origin["model"] == "claude" and origin["seed"] == SEED and origin["rationale"].startswith("Keep rows")
    assert facts["torch_compile"]["seeds"] == 1 and facts["torch_compile"]["best_seed_fitness"] == 1.3


def test_the_pr_body_tells_the_llm_search():
    archive, seed, facts = llm_run()
    md = render(archive, seed, facts)
    assert "Operators: tuner, rewrite, diff (the tuner over k#0.num_warps), on 2 islands" in md
    assert "3 rounds of up to 2 proposals (6 in all, 1 without usable code after resampling)" in md
    assert "stopped because its evaluation budget was spent; temperature 0.6, top-p 0.95" in md
    assert "| `claude` | 3 (1) | 9000 | 2500 | 4000 / 1000 | $0.0123 | 2 | 1 |" in md
    assert "In all 5 LLM calls, 25500 tokens, $0.0123" in md and "diff: 0 of 1 correct." in md
    assert "offered in every prompt (1 kernel, generated for case `N=8/float16`); 1 seed ported it, 1 correct" in md
    assert ("The champion (candidate 1) is a full rewrite of the baseline by `claude`, porting torch.compile's "
            "kernel, generation 0 on island 1, found at evaluation 1 of 3.") in md
    assert "> Keep rows in registers; cc @\u200boctocat." in md and "@octocat" not in md  # pings nobody


def test_tuner_runs_and_absent_seeds_read_as_before():
    archive, seed, facts = llm_run()
    md = render(archive, None, {**facts, "best_origin": None,
                                "torch_compile": {**facts["torch_compile"], "offered": False,
                                                  "reason": "this run uses the interpret backend"}},
                verdict="no_improvement")
    assert "not offered: this run uses the interpret backend." in md and "The champion" not in md
    tuner_only = render(archive, None, {**facts, "llm": None, "models": []}, verdict="no_improvement")
    assert "Operator: offline launch-parameter tuner over k#0.num_warps." in tuner_only and "LLM calls" not in tuner_only


def test_change_lines_and_rationales():
    assert describe_change({"model": "m", "attempts": 2, "seed": SEED}, "rewrite", 0) == (
        "full rewrite of the baseline by model m, porting torch.compile's kernel for the reference "
        "(accepted after 2 attempt(s))")
    assert describe_change({"model": "m"}, "diff", 4).startswith("SEARCH/REPLACE edit of candidate 4")
    assert rationale("a" * 700 + "\n```python\n") == "a" * 599 + "…"
    assert rationale("Why.\n<<<<<<< SEARCH\nx\n") == "Why."
    assert rationale("See ![x](http://t/p.png) <img src=x>") == "See ![x] (http://t/p.png) &lt;img src=x>"
