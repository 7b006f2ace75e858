"""Prompts: task and hardware facts in the cached prefix, the parent's per-case table, trimmed failure
feedback, inspirations, and a token budget that drops inspirations first and keeps the parent."""
from engine_fixtures import EXAMPLE
from test_engine_archive import SOFTMAX

from bot.config import load_config, task_spec
from evolver.candidate import Candidate
from evolver.prompts import PromptBuilder, estimate_tokens, hardware_facts
from runners.results import CaseResult, Environment, Evaluation

SPEC = task_spec("softmax", load_config(EXAMPLE).kernels["softmax"], "triton")


def parent() -> Candidate:
    c = Candidate(3, SOFTMAX, "rewrite", parent_id=0)
    c.evaluation = Evaluation(stage="done", ok=True, timed=True, env=Environment("triton", "NVIDIA H200",
                                                                                  peak_bandwidth_gbs=4000.0),
                              cases=[CaseResult("M=256,N=32000/float16", correct=True, baseline_us=13.1,
                                                candidate_us=8.2, bandwidth_gbs=3000.0)])
    return c


def failure(i: int, text: str) -> Candidate:
    c = Candidate(i, SOFTMAX + f"\n# {i}\n", "rewrite")
    c.evaluation = Evaluation(stage="correctness", error=text,
                              cases=[CaseResult("M=6,N=200/float16", correct=False, max_abs_err=0.5,
                                                err_ratio=120.0, message="values differ")])
    return c


def test_static_prefix_holds_task_rules_hardware_and_baseline():
    b = PromptBuilder(SPEC, SOFTMAX, "triton", "NVIDIA H200")
    assert "`softmax`" in b.static and "M=256,N=32000/float16" in b.static and "132 SMs" in b.static
    atol = f"float16 atol {SPEC.tolerance('float16').atol:g}"
    assert "warp width 32" in b.static and SOFTMAX.strip()[:200] in b.static and atol in b.static
    p = b.build(parent(), [], [])
    assert p.static == b.static  # the same bytes for every call: what the provider caches


def test_metax_warps_are_64_wide_and_the_interpreter_says_so():
    assert "warp width 64" in hardware_facts("MetaX C500", "triton")
    assert "warp width 32" in hardware_facts("NVIDIA H200", "triton")
    assert "interpreter" in hardware_facts(None, "interpret")
    from runners.backends import get_backend

    assert "warp width 64" in hardware_facts("Some MetaX part", get_backend("maca"))  # the backend's own width
    assert "warp width 32" in hardware_facts("NVIDIA H200", get_backend("cuda"))
    measured = hardware_facts("NVIDIA H200", "triton", measured_gbs=4123.4)
    assert "132 SMs" in measured and "measured on this device: 4123 GB/s" in measured
    assert "measured" not in hardware_facts("cpu", "interpret", measured_gbs=10.0)


def test_dynamic_part_has_the_parent_table_failures_and_inspirations():
    insp = parent()
    insp.id, insp.source = 5, SOFTMAX.replace("num_stages=1", "num_stages=2")
    p = PromptBuilder(SPEC, SOFTMAX, "triton", "NVIDIA H200").build(
        parent(), [insp], [failure(7, "compile error: " + "x" * 5000)], kind="diff")
    assert "| M=256,N=32000/float16 | 13.10 | 8.20 | 1.598x | 75 |" in p.dynamic
    assert "candidate 7 stopped at **correctness**" in p.dynamic and "largest mismatch on M=6,N=200" in p.dynamic
    assert "[...]" in p.dynamic and p.dynamic.count("x" * 100) < 20  # the long error was trimmed
    assert "candidate 5" in p.dynamic and "SEARCH/REPLACE" in p.dynamic


def test_token_budget_drops_inspirations_then_failures_but_keeps_the_parent():
    insps = []
    for i in range(6):
        c = parent()
        c.id, c.source = 10 + i, SOFTMAX + f"\n# inspiration {i}\n" + "y = 1\n" * 200
        insps.append(c)
    fails = [failure(20 + i, "error " * 300) for i in range(5)]
    full = PromptBuilder(SPEC, SOFTMAX, "triton", token_budget=10**6).build(parent(), insps, fails)
    builder = PromptBuilder(SPEC, SOFTMAX, "triton", token_budget=3500)
    small = builder.build(parent(), insps, fails)
    assert estimate_tokens(small.system + small.static + small.dynamic) <= 3500 < \
        estimate_tokens(full.system + full.static + full.dynamic)
    assert "inspiration 5" in full.dynamic and "inspiration 0" not in small.dynamic
    assert SOFTMAX.strip()[-200:] in small.dynamic  # the parent is always there
