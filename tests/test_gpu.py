"""GPU behaviour of the evaluator (timing, poisoning, timed-output checks). Runs only where CUDA is present:
on the H200 through bench/gpu_checks.sh, whose output is committed under bench/results/."""
import pytest
import torch

from conftest import CHEATS, EXAMPLE, run_past_the_policy

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (see bench/gpu_checks.sh)")]


@pytest.fixture(scope="module")
def gpu_evaluator(tmp_path_factory):
    from bot.config import load_config, task_spec
    from runners.extract import build_bundle
    from runners.sandbox import Evaluator

    spec = task_spec("rms_norm", load_config(EXAMPLE).kernels["rms_norm"], "triton")
    bundle = tmp_path_factory.mktemp("gpu-bundle")
    build_bundle(EXAMPLE, spec, bundle)
    with Evaluator(bundle, "triton", timeout=300, trials=2) as evaluator:
        yield evaluator


def test_baseline_against_itself_times_near_one(gpu_evaluator):
    ev = gpu_evaluator.evaluate(gpu_evaluator.baseline, seed=1)
    assert ev.ok and ev.timed, ev.error
    for case in ev.cases:
        assert case.timing_method == "cuda-graph"
        assert 0.9 < case.speedup < 1.1, case
        assert case.baseline_host_us > 0 and case.candidate_host_us > 0
    assert ev.env.peak_bandwidth_gbs > 1000 and "H" in ev.env.device


@pytest.mark.parametrize("cheat, stage", [
    ("wrong_result.py", "correctness"),
    ("uninitialised_output.py", "correctness"),
    ("memoized_output.py", "correctness"),
    ("modifies_input.py", "correctness"),
    ("nan_output.py", "correctness"),
    ("lazy_after_warmup.py", "timing"),
])
def test_cheats_are_caught_on_the_gpu(gpu_evaluator, cheat, stage):
    ev = gpu_evaluator.evaluate((CHEATS / cheat).read_text(), seed=2)
    assert not ev.ok and ev.stage == stage, (ev.stage, ev.error)


def test_honest_rewrite_is_timed(gpu_evaluator):
    ev = gpu_evaluator.evaluate((CHEATS / "honest_rewrite.py").read_text(), seed=3)
    assert ev.ok and ev.timed and ev.fitness > 0, ev.error


def test_remembered_inputs_past_the_policy_are_caught_by_refilled_timing(gpu_evaluator):
    ev = run_past_the_policy(gpu_evaluator, (CHEATS / "remembers_inputs.py").read_text(), time_it=True)
    assert not ev.ok and ev.stage == "timing" and "timed calls are wrong" in ev.error, (ev.stage, ev.error)


def test_slowed_oracle_past_the_policy_is_caught_on_the_gpu(gpu_evaluator):
    ev = run_past_the_policy(gpu_evaluator, (CHEATS / "slowed_oracle.py").read_text(), time_it=True)
    assert not ev.ok and ev.stage == "policy" and "JITFunction.run" in ev.error
