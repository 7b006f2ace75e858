"""Attacks on the judge that only a GPU can show (timing, graph capture, the own-kernel share), through the
real Evaluator at the configured (serving) sizes, past the static policy. Run on the H200 (see
bench/gpu_checks.sh). Attacks that the judge lets through today are `xfail(strict=True)` with the mechanism;
tests/test_judge_attacks.py shows the same two window attacks on the CPU with a timed stand-in."""
import pytest
import torch
from conftest import CHEATS, EXAMPLE, run_past_the_policy

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300),  # the first test starts the module's evaluator (150 s ran out)
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (see bench/gpu_checks.sh)")]


@pytest.fixture(scope="module")
def gpu_attack_evaluator(tmp_path_factory):
    from bot.config import load_config, task_spec
    from runners.extract import build_bundle
    from runners.sandbox import Evaluator

    spec = task_spec("rms_norm", load_config(EXAMPLE).kernels["rms_norm"], "triton")
    bundle = tmp_path_factory.mktemp("gpu-attack-bundle")
    build_bundle(EXAMPLE, spec, bundle)
    with Evaluator(bundle, "triton", timeout=300, trials=2) as evaluator:
        yield evaluator


def _evaluate(evaluator, cheat: str):
    return run_past_the_policy(evaluator, (CHEATS / cheat).read_text(), time_it=True)


def _summary(ev) -> tuple:
    return ev.stage, ev.error, [(c.case, c.speedup, c.judge_ratio, c.own_kernel_share) for c in ev.cases]


# cheat, stage, words in the error ("" : any): refused there on the H200 (bench/results/evaluator-h200/attacks-gpu.txt)
REFUSED = [
    ("token_triton_kernel.py", "kernel", "own"),
    ("skips_work_under_capture.py", "timing", ""),
    ("lazy_token_kernel.py", "timing", ""),
]
# Timing forgeries: what matters is that the forged time earns nothing. Refused, or every case credited with no
# more than the cheat's honest kernel gets (about 1x: the judge credits a speedup only as far as its own clock
# saw it, and nothing where its clock cannot resolve the size). Several of them also compute the residual add
# in torch and are refused for their own-kernel share at the largest case, after every case was timed.
NO_CREDIT = ["content_keyed_cache.py", "skips_graph_replays.py", "forges_sample_times.py",
             "forges_samples_at_decode.py", "derives_window_seed.py", "overlaps_graph_replays.py"]
HONEST_BOUND = 1.10  # the cheats' kernels are the baseline's at best; the clock's tolerance and noise on top


def _no_credit(ev) -> bool:
    return (not ev.ok and ev.stage == "timing") or all((c.speedup or 0.0) <= HONEST_BOUND for c in ev.cases)


@pytest.mark.parametrize("cheat, stage, words", REFUSED, ids=[c[0] for c in REFUSED])
def test_gpu_attack_is_refused(gpu_attack_evaluator, cheat, stage, words):
    ev = _evaluate(gpu_attack_evaluator, cheat)
    assert not ev.ok and ev.stage == stage and words in (ev.error or ""), _summary(ev)


@pytest.mark.parametrize("cheat", NO_CREDIT)
def test_a_forged_time_earns_nothing(gpu_attack_evaluator, cheat):
    ev = _evaluate(gpu_attack_evaluator, cheat)
    assert ev.stage not in ("compile", "crashed", "baseline"), _summary(ev)  # the cheat ran
    assert _no_credit(ev), _summary(ev)


@pytest.mark.xfail(strict=True, reason=(
    "round 33: the candidate's worker captures the window's pass in graphs it splits where no checkpoint's link "
    "crosses (it is handed Checkpoints.at before the capture) and replays them side by side at decode sizes: every "
    "trace, link and output is the oracle's (tests/test_judge_attacks_round33.py on the CPU). Fix: a link after every "
    "call, or round 16's flag-gated checkpoint after every call. Not yet run on the H200"))
def test_graphs_split_between_checkpoints_earn_nothing(gpu_attack_evaluator):
    ev = _evaluate(gpu_attack_evaluator, "round33_splits_its_graphs_between_checkpoints.py")
    assert ev.stage not in ("compile", "crashed", "baseline"), _summary(ev)  # the cheat ran
    assert _no_credit(ev), _summary(ev)


@pytest.mark.parametrize("cheat", ["forges_sample_times.py", "derives_window_seed.py", "skips_graph_replays.py"])
def test_the_search_protocol_credits_no_forged_time(gpu_attack_evaluator, cheat):
    """The screening protocol of the search (shorter samples and window) keeps every check: a forged time earns
    nothing there either, so the search is not steered toward cheats."""
    ev = gpu_attack_evaluator.evaluate((CHEATS / cheat).read_text(), seed=7, time_it=True, trials=2,
                                       static_policy=False, protocol="search")
    assert ev.protocol == "search" and ev.stage not in ("compile", "crashed", "baseline"), _summary(ev)
    assert _no_credit(ev), _summary(ev)


def test_the_search_protocol_ranks_the_honest_rewrite_like_the_full_one(gpu_attack_evaluator):
    full = _evaluate(gpu_attack_evaluator, "honest_rewrite.py")
    quick = gpu_attack_evaluator.evaluate((CHEATS / "honest_rewrite.py").read_text(), seed=8, time_it=True,
                                          trials=2, static_policy=False, protocol="search")
    assert full.ok and quick.ok and quick.timed, (_summary(full), _summary(quick))
    assert abs(quick.fitness / full.fitness - 1) < 0.05, (full.fitness, quick.fitness)
    assert quick.duration_s < full.duration_s, (quick.duration_s, full.duration_s)


def test_the_honest_rewrite_still_passes_after_the_attacks(gpu_attack_evaluator):
    """Patched graph replays, events or handlers stay in the candidates' own (dead) processes."""
    ev = _evaluate(gpu_attack_evaluator, "honest_rewrite.py")
    assert ev.ok and ev.timed, _summary(ev)


@pytest.mark.xfail(strict=True, reason=(
    "the own-kernel share comes from Server.profile in the candidate's own process: a torch-only candidate "
    "with a token Triton kernel replaces the `profile` handler (a local of Server.serve, reached through the "
    "frames) and claims 100 %. Fix: profile from outside the candidate's process (CUPTI/nsys run by a "
    "supervisor), or not at all for the verdict"))
def test_a_forged_kernel_profile_is_refused(gpu_attack_evaluator):
    ev = _evaluate(gpu_attack_evaluator, "forges_kernel_profile.py")
    assert not ev.ok and ev.stage == "kernel", _summary(ev)


def test_the_timed_pass_cannot_be_precomputed_on_the_gpu(gpu_attack_evaluator):
    """(A hole until the window's seed came with the timed request; see tests/test_judge_attacks.py.)"""
    ev = _evaluate(gpu_attack_evaluator, "precomputes_on_refill.py")
    assert not ev.ok and ev.stage == "timing", _summary(ev)


def test_the_oracles_revealed_outputs_cannot_be_overwritten_on_the_gpu(gpu_attack_evaluator):
    """(A hole until the oracle's revealed outputs were read before the candidate's reveal.)"""
    ev = _evaluate(gpu_attack_evaluator, "overwrites_oracle_reveal.py")
    assert not ev.ok and ev.stage == "timing", _summary(ev)


# ---- second round (tests/test_judge_attacks_round2.py has the CPU side) -------------------------------------
# The xfail marks below are predictions made without a GPU (from the judge's code and the CPU stand-in): an
# XPASS(strict) means the judge already refuses that attack on the H200; then drop the mark.

def _ran(ev) -> None:
    """The cheat itself must have run: a cheat that does not compile or crashes its worker shows a mistake in the
    cheat, not a judge that holds (raised as an error, which the xfail marks below do not accept)."""
    if ev.stage in ("compile", "crashed", "baseline", "timeout"):
        raise RuntimeError(f"the cheat did not run: {_summary(ev)}")


def test_negative_sample_times_are_refused_on_the_gpu(gpu_attack_evaluator):
    ev = _evaluate(gpu_attack_evaluator, "negative_sample_times.py")
    _ran(ev)
    assert not ev.ok and ev.stage == "timing", _summary(ev)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "runners/worker.py profile: the own-kernel share is a fresh direct call under torch.profiler in the "
    "candidate's process; the candidate asks torch._C._autograd._profiler_enabled() and runs its Triton kernel "
    "only then (torch elsewhere, one-row launch of its kernel for the launch record). Fix: profile a replay "
    "of the captured timing graph (kernels fixed at capture) or from outside the candidate's process"))
def test_a_kernel_that_runs_only_under_the_profiler_is_refused(gpu_attack_evaluator):
    ev = _evaluate(gpu_attack_evaluator, "detects_the_profiler.py")
    _ran(ev)
    assert not ev.ok and ev.stage == "kernel", _summary(ev)


def test_torch_at_the_unprofiled_sizes_is_refused(gpu_attack_evaluator):
    ev = _evaluate(gpu_attack_evaluator, "torch_below_the_largest_case.py")
    _ran(ev)
    assert not ev.ok and ev.stage == "kernel", _summary(ev)


def test_work_skipped_only_in_the_samples_graph_is_refused(gpu_attack_evaluator):
    """Refused, or credited with no more than the honest kernel's speedup (about 1, within the clock's 5 % and noise)."""
    ev = _evaluate(gpu_attack_evaluator, "skips_calls_in_the_samples_graph.py")
    _ran(ev)
    assert (not ev.ok and ev.stage == "timing") or max((c.speedup or 0.0) for c in ev.cases) < 1.15, _summary(ev)


def test_the_window_commitments_cannot_be_steered_on_the_gpu(gpu_attack_evaluator):
    """(Was a hole, a fake 1.67x at T=512: the commitment was a byte sum, steered after the clock.) The commitment
    is a keyed tree hash now (runners/timing.py), the same code on CUDA as in the CPU test of round 2."""
    ev = _evaluate(gpu_attack_evaluator, "forges_window_commitments.py")
    _ran(ev)
    assert not ev.ok and ev.stage == "timing" and "not the ones committed to" in (ev.error or ""), _summary(ev)


def test_a_candidate_that_slows_the_oracle_down_is_refused(gpu_attack_evaluator):
    """Refused, or credited with no more than the honest kernel's speedup (it is the baseline's own code)."""
    ev = _evaluate(gpu_attack_evaluator, "hogs_the_gpu_while_idle.py")
    _ran(ev)
    assert not ev.ok or max((c.speedup or 0.0) for c in ev.cases) < 1.15, _summary(ev)


def test_a_candidate_cannot_shed_the_windows_extra(gpu_attack_evaluator):
    """Refused, or credited with no more than the honest kernel's speedup (about 1, within the clock's 5 % and noise)."""
    ev = _evaluate(gpu_attack_evaluator, "sheds_the_window_extra.py")
    _ran(ev)
    assert (not ev.ok and ev.stage == "timing") or max((c.speedup or 0.0) for c in ev.cases) < 1.15, _summary(ev)


def test_the_secret_cannot_be_recovered_on_the_gpu(gpu_attack_evaluator):
    ev = _evaluate(gpu_attack_evaluator, "recovers_the_secret.py")
    _ran(ev)
    assert _no_credit(ev), _summary(ev)


def test_a_candidate_cannot_shed_part_of_the_windows_extra(gpu_attack_evaluator):
    """Its epilogue's byte sums no longer stand in for the commitment (a keyed tree hash since the fifth session),
    so it keeps the lead and sheds nothing; a cheaper implementation of the hash (fused into the kernel) is the
    open form of this attack (docs/evaluation.md)."""
    ev = _evaluate(gpu_attack_evaluator, "sheds_part_of_the_window_extra.py")
    _ran(ev)
    assert _no_credit(ev), _summary(ev)


def test_a_kernel_named_void_does_not_claim_torchs_kernels(gpu_attack_evaluator):
    ev = _evaluate(gpu_attack_evaluator, "kernel_named_void.py")
    _ran(ev)
    assert not ev.ok and ev.stage == "kernel", _summary(ev)
