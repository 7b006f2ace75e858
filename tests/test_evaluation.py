"""The evaluation worker on the interpreter: baseline, tuned variants, the sandbox's environment."""
import os

from evolver.launch_params import find_knobs, render
from runners.sandbox import scrubbed_env
from runners.judge import implausible
from runners.results import CaseResult


def test_baseline_is_correct_against_itself(rms_evaluator):
    ev = rms_evaluator.evaluate(rms_evaluator.baseline, seed=5)
    assert ev.ok and ev.stage == "done"
    assert [c.case for c in ev.cases] == ["T=3,H=256/float16", "T=5,H=96,residual/float16"]
    assert all(c.err_ratio == 0 for c in ev.cases)  # same code, same inputs, same bits
    assert ev.env.backend == "interpret" and "interpreter" in ev.env.device
    assert any("not timed" in n for n in ev.notes)


def test_tuned_launch_parameters_stay_correct(rms_evaluator):
    knobs = find_knobs(rms_evaluator.baseline)
    source = render(rms_evaluator.baseline, knobs, {k.key: len(k.choices) - 1 for k in knobs})
    assert source != rms_evaluator.baseline
    assert rms_evaluator.evaluate(source, seed=6).ok


def test_sandbox_environment_has_no_secrets(monkeypatch):
    for name in ("GITHUB_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "MY_PASSWORD"):
        monkeypatch.setenv(name, "s3cret")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = scrubbed_env("interpret")
    assert "s3cret" not in env.values()
    assert env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert "TRITON_INTERPRET" not in scrubbed_env("triton")
    assert os.path.isdir(env["PYTHONPATH"])


def test_implausible_results_are_quarantined():
    l2, peak = 50 << 20, 4000.0

    def case(base_us, new_us, nbytes):
        r = CaseResult("c", correct=True, baseline_us=base_us, candidate_us=new_us, bytes_moved=nbytes)
        r.bandwidth_gbs = nbytes / (new_us * 1e-6) / 1e9
        return r

    assert implausible(case(10, 8, 1 << 20), peak, l2) == ""
    assert "plausibility bound" in implausible(case(100, 5, 1 << 20), peak, l2)
    big = 1 << 30  # 1 GiB in 100 us is 10.7 TB/s: more than the DRAM can move
    assert "above the measured peak" in implausible(case(150, 100, big), peak, l2)
    small = 8 << 20  # the same bandwidth from L2-resident data is believable
    assert implausible(case(1.2, 0.8, small), peak, l2) == ""
