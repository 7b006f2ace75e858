"""Every anti-cheat rule has a cheating kernel that it must catch (tests/cheats/), run through the real
sandbox: a spawned worker, the interpreter, fresh secret seeds."""
import pytest

from conftest import CHEATS, run_past_the_policy
from runners.sandbox import Evaluator


def test_honest_rewrite_passes(rms_evaluator):
    ev = rms_evaluator.evaluate((CHEATS / "honest_rewrite.py").read_text(), seed=11)
    assert ev.ok, ev.error
    assert all(c.correct and c.trials == 2 for c in ev.cases)
    assert not ev.timed and ev.fitness is None  # the interpreter never yields a speed


@pytest.mark.parametrize("cheat, stage, words", [
    ("wrong_result.py", "correctness", "out of tolerance"),
    ("uninitialised_output.py", "correctness", "output"),
    ("memoized_output.py", "correctness", "trial 1"),
    ("modifies_input.py", "correctness", "input `hidden_states` was modified"),
    ("nan_output.py", "correctness", "NaN"),
    ("side_stream.py", "policy", "Stream"),
    ("reads_environment.py", "policy", "import os"),
    ("calls_baseline.py", "policy", "import sys"),
    ("patches_timer.py", "policy", ".Event"),
    ("detects_capture.py", "policy", "is_current_stream_capturing"),
    ("changed_signature.py", "policy", "eps=0.001"),
    ("forged_verdict.py", "policy", "from torch import os"),
    ("patched_comparison.py", "policy", "assigning `torch.Tensor.abs`"),
    ("slowed_oracle.py", "policy", "assigning `jit.JITFunction.run`"),
    ("remembers_inputs.py", "policy", "`id()`"),
])
def test_cheat_is_caught(rms_evaluator, cheat, stage, words):
    ev = rms_evaluator.evaluate((CHEATS / cheat).read_text(), seed=12)
    assert not ev.ok and ev.fitness == 0.0
    assert ev.stage == stage, ev.error
    assert words in ev.error


def test_kernel_that_does_not_compile_stops_at_compile(rms_evaluator):
    broken = rms_evaluator.baseline.replace("tl.rsqrt(", "tl.rsqrtt(")
    ev = rms_evaluator.evaluate(broken, seed=13)
    assert ev.stage == "compile" and "rsqrtt" in ev.error


def test_import_error_stops_at_compile(rms_evaluator):
    ev = rms_evaluator.evaluate(rms_evaluator.baseline.replace("from .utils import", "from .utilz import"), seed=1)
    assert ev.stage == "compile" and "import failed" in ev.error


def test_hang_is_killed_by_the_hard_timeout(rms_bundle):
    import os

    with Evaluator(rms_bundle, "interpret", timeout=6, trials=1, spare=False) as evaluator:
        pids = []
        spawn = evaluator._spawn

        def spy(role):
            worker = spawn(role)
            pids.append(worker.proc.pid)
            return worker

        evaluator._spawn = spy
        ev = evaluator.evaluate((CHEATS / "hangs.py").read_text(), seed=3)
        assert ev.stage == "timeout" and "killed after 6 s" in ev.error
        for pid in pids[1:]:  # the candidate's whole process group is gone
            with pytest.raises(ProcessLookupError):
                os.killpg(pid, 0)
        evaluator.timeout = 120  # a baseline evaluation on a loaded machine needs more than the hang's 6 s
        again = evaluator.evaluate(evaluator.baseline, seed=4)  # and the next evaluation works
        assert again.ok, again.error


@pytest.mark.parametrize("cheat", ["patched_comparison.py", "slowed_oracle.py"])
def test_monkey_patching_past_the_policy_reaches_nothing_of_the_judge(rms_evaluator, cheat):
    """Patching torch or Triton changes only the candidate's own process: the oracle and the comparison live
    elsewhere. The blinded comparison's garbage is caught; the 'slowed oracle' is simply an honest torch
    computation, refused for launching no kernel of its own."""
    ev = run_past_the_policy(rms_evaluator, (CHEATS / cheat).read_text())
    assert not ev.ok
    assert ev.stage == {"patched_comparison.py": "correctness", "slowed_oracle.py": "kernel"}[cheat], ev.error


def test_forged_reply_on_the_workers_pipe_is_a_protocol_error(rms_evaluator):
    ev = run_past_the_policy(rms_evaluator, (CHEATS / "forged_verdict.py").read_text())
    assert not ev.ok and ev.stage == "crashed" and "broke the protocol" in ev.error


def test_the_judge_folder_is_removed_on_close(rms_bundle):
    evaluator = Evaluator(rms_bundle, "interpret", timeout=120, trials=1, spare=True)
    root = evaluator.root
    assert evaluator.evaluate(evaluator.baseline, seed=9).ok
    evaluator.close()
    assert not root.exists()
