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


def test_a_trials_two_calls_run_at_once_behind_the_uid_wall(rms_bundle):
    """runners/judge.py ``_trial_calls``: once the oracle has answered a case (and autotunes nothing), a trial sends
    both calls before it waits for either, where the candidate's user cannot read the oracle's folder (here forced
    with ``pair_trials`` where this machine has no uid wall); the verdicts are the sequential ones (the same bits),
    and a wrong kernel is still refused on the paired trials."""
    from runners.sandbox import Evaluator

    with Evaluator(rms_bundle, "interpret", timeout=120, trials=2) as ev:
        ev.pair_trials = True
        first = ev.evaluate(ev.baseline, seed=5)
        second = ev.evaluate(ev.baseline, seed=6)
        wrong = ev.evaluate(ev.baseline.replace("rstd = ", "rstd = 1.05 * "), seed=7)
        crash = ev.evaluate(ev.baseline.replace("rstd = ", "rstd = 1 / 0 + "), seed=8)
        after = ev.evaluate(ev.baseline, seed=9)  # nothing left in a pipe by the refusals
    assert first.ok and second.ok and after.ok, (first.error, second.error, after.error)
    assert first.phases.get("correctness.oracle", 0) > 0  # a case's first trial: one call after the other
    assert second.phases.get("correctness.both", 0) > 0 and "correctness.oracle" not in second.phases, second.phases
    assert all(c.err_ratio == 0 for c in second.cases)
    assert not wrong.ok and wrong.stage == "correctness", (wrong.stage, wrong.error)
    assert not crash.ok and crash.stage in ("compile", "correctness"), (crash.stage, crash.error)


def test_without_the_uid_wall_a_trials_calls_stay_one_after_the_other(rms_evaluator):
    """Under one user a candidate could read the oracle's outputs while both run: no pairing then (and behind the
    wall, pairing once the oracle has answered the cases)."""
    ev = rms_evaluator.evaluate(rms_evaluator.baseline, seed=11)
    again = rms_evaluator.evaluate(rms_evaluator.baseline, seed=12)
    assert ev.ok and again.ok, (ev.error, again.error)
    assert ("correctness.both" in again.phases) == rms_evaluator.isolation.active, again.phases
