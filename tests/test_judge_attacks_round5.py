"""Round 5: what the review of stop 13's judge changes found (the NaN padding of the layout trial, the per-slot
allowance of the judge's clock). Each attack has a cheat in tests/cheats/round5_*.py, a control showing the cheat
is wrong (or slower) outside the judge, and the judge's verdict on it; the holes still open are strict xfails
with the mechanism and the fix in their reasons (the NaN padding is closed: finite padding carried with the
storage)."""
import pytest
import torch
from test_judge_attacks_round4 import _gpu_summary, _import, _needs_gpu, _source, gpu_rms_evaluator  # noqa: F401

from runners.layouts import row_padded
from runners.task import read_task

PADDING = "round5_strides_only_on_nan_padding.py"
PARITY = "round5_claims_parity_where_slower.py"


def test_a_kernel_that_takes_strides_only_on_nan_padding_is_wrong_on_a_real_slice(rms_bundle, tmp_path):
    """Control: right on the NaN padding the judge used to put in, wrong on a slice of a wider buffer with finite
    neighbours, and wrong on the judge's padding now (finite values drawn like the input's own)."""
    module = read_task(rms_bundle).module
    base = _import(rms_bundle, module, None, tmp_path)
    cheat = _import(rms_bundle, module, _source(PADDING), tmp_path)
    x, w = torch.randn(6, 96), torch.rand(96) + 0.5
    nan_padded = torch.full((6, 112), float("nan"))[:, :96]  # the old trial's input: NaN past every row
    nan_padded.copy_(x)
    assert torch.allclose(cheat.rms_norm(nan_padded, w), base.rms_norm(x, w), atol=1e-5)
    wide = torch.randn(6, 128)
    wide[:, :96] = x
    real = wide[:, :96]  # qkv[:, :H]: the neighbours are data, not NaN
    assert torch.allclose(base.rms_norm(real, w), base.rms_norm(x, w), atol=1e-5)
    assert not torch.allclose(cheat.rms_norm(real, w), base.rms_norm(x, w), atol=1e-2)
    for seed in range(4):
        padded = row_padded({"x": x}, gen=torch.Generator().manual_seed(seed))[0]["x"]
        assert torch.allclose(base.rms_norm(padded, w), base.rms_norm(x, w), atol=1e-5)
        assert not torch.allclose(cheat.rms_norm(padded, w), base.rms_norm(x, w), atol=1e-2)


# Was a hole: the layout trial's padding was NaN, a value no real caller's neighbouring data has, so a kernel could
# take the strides only where it saw NaN past a row and assume dense rows everywhere else, right in every trial the
# judge ran. The padding is now finite, drawn by the judge like the tensor's own values (runners/inputs.py
# padding_like), and travels with the whole storage in the tensor file (runners/wire.py), under a header like any
# other input's: the worker no longer fills the gaps itself, and nothing tells the trial from a caller's slice.
def test_a_kernel_that_takes_strides_only_on_nan_padding_is_refused(rms_evaluator):
    ev = rms_evaluator.evaluate(_source(PADDING), seed=21, time_it=False, static_policy=False)
    assert not ev.ok and ev.stage == "correctness", (ev.stage, ev.error[:300])
    assert "slices of a wider buffer" in ev.error, ev.error[:300]


@pytest.mark.gpu
@_needs_gpu
def test_gpu_a_kernel_that_takes_strides_only_on_nan_padding_is_refused(gpu_rms_evaluator):  # noqa: F811
    ev = gpu_rms_evaluator.evaluate(_source(PADDING), seed=21, time_it=False, static_policy=False)
    assert not ev.ok and ev.stage == "correctness", _gpu_summary(ev)
    assert "slices of a wider buffer" in ev.error, ev.error[:300]


def test_a_kernel_that_runs_twice_on_small_inputs_is_right(rms_evaluator):
    """Control for the parity claim: the cheat's outputs are right everywhere (only its time is wrong), so the
    judge's clock is all that can catch it."""
    ev = rms_evaluator.evaluate(_source(PARITY), seed=22, time_it=False, static_policy=False)
    assert ev.ok, ev.error


@pytest.mark.gpu
@_needs_gpu
def test_gpu_a_slowdown_claimed_as_parity_is_not_credited_parity(gpu_rms_evaluator):  # noqa: F811
    """Was a strict xfail (a prediction): the per-slot allowance left T=1,H=4096 unresolved and a slowdown was
    credited parity. With the commitments out of the timed request (one digest; the per-slot hashes after the
    clock) the H200 refused it (bench/results/evaluator-h200/session5/call3-gpu-tests.txt)."""
    ev = gpu_rms_evaluator.evaluate(_source(PARITY), seed=1, time_it=True, trials=2, static_policy=False)
    small = [c for c in ev.cases if c.case.startswith("T=1,")]
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness"), _gpu_summary(ev)
    assert (not ev.ok and ev.stage == "timing") or all((c.speedup or 0.0) < 0.8 for c in small), _gpu_summary(ev)
