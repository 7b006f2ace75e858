"""Attacks on the judge, eighteenth round: round 17's three changes (the finite-mask trial, the re-check after
timing on trial 1, the checkpoints' outputs on another device).

1. **One finite mask value.** Round 17 closed the softmax that writes zeros for a row whose every score is masked
   with a trial whose rows are wholly and partly at ``torch.finfo(dtype).min`` (runners/layouts.py
   ``masked_rows(..., lowest=True)``). That is one value, fixed and known: callers mask with others too (-10000.0 in
   older Hugging Face models, -1e9 in many others), under which a padding row is, as at ``finfo.min``, the uniform
   distribution from the baseline. A softmax that writes zeros for a row whose maximum is at or below -10000 unless
   it is exactly ``finfo.min`` (``tests/cheats/round18_zeros_for_a_row_all_at_another_mask_value.py``) is right on
   every row the judge drew and was accepted. Control: zeros on a row all at -10000, the baseline's 1/N; right on a
   row all at ``finfo.min``. Closed after the round: a second wholly masked row and the partly masked ones take a
   value drawn per trial above ``finfo.min`` (-1e4, or a power of ten up to the dtype's range); a row all of one
   value is uniform under any softmax, so nothing honest depends on which.
2. **The re-check after timing** (``check_case(..., secret + 1, 2, ..., first=1, ...)``): read, not attacked with a
   test. Its trial 1 is held to ``first_scales`` of the case, set by the correctness phase's trial 0 before timing
   (every case is checked before timing, so the key is there); ``result.launched`` is filled at ``trial == first``
   on the fresh CaseResult, from the worker's per-call Recorder (runners/worker.py), so the own-kernel check sees
   the re-check's own launches; its seeds are ``secret + 1``'s, keyed-hashed (runners/protocol.py ``trial_seed``),
   so no trial of it repeats one of the first phase. No false refusal found; it runs only where timing does (GPU or
   the timed stand-in).
3. **An output on another device in the window** (runners/checkpoints.py ``Checkpoints.after``): its size is
   recorded as 0 there, but the layout (``[call, place, size]`` of every place that held a tensor) goes back with
   the traces and ``traces_wrong`` refuses any layout other than the baseline's: a candidate that moves an output
   off the slots' device in the window only is refused, the baseline's own host output (size 0 on both sides)
   passes. Plain test below.

4. **A tie the finite-mask trial makes** (false refusal). The wholly masked row of the finite-mask trial holds one
   value N times: every index of it is a maximum. Elsewhere the judge's float32 trials never tie (normal draws; the
   -inf trial leaves distinct finite values in every row), so an op that returns indices (top-k, an argmax) met its
   first tie there. A top-2 over rows in Triton that takes the last index of a maximum where the baseline takes the
   first (both right: ``torch.topk`` does not fix the order of ties, and CPU and CUDA differ) is accepted on every
   earlier trial and refused by this one, at every seed tried (5-10): "output 1: 4 elements differ (exact match
   required)" (two wholly masked rows of six, two indices each). Closed after the round: the finite-mask trial is
   not asked where the baseline returns integer outputs (an index there is a tie-break). (At float16 the ordinary
   trials already tie now and
   then: one of three seeds refused this candidate at trial 1, before any mask; not this round's change.)

Runs on the interpreter; module fixtures, small shapes.
"""
from __future__ import annotations

import pytest
import torch
from test_judge_attacks_round4 import _import, _source, softmax_bundle  # noqa: F401 (fixture)
from test_judge_attacks_round7 import _summary, one_module_bundle

from runners.checkpoints import traces_wrong
from runners.compare import compare_outputs
from runners.task import DEFAULT_TOLERANCES

OTHER_VALUE = "round18_zeros_for_a_row_all_at_another_mask_value.py"
_SOFTMAX_MODULE = "tinyserve/kernels/softmax.py"


# ---- 1. one finite mask value ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def other_value_run(softmax_bundle):  # noqa: F811
    from runners.sandbox import Evaluator

    with Evaluator(softmax_bundle, "interpret", timeout=120, trials=2) as ev:
        return ev.evaluate(_source(OTHER_VALUE), seed=172, time_it=False, static_policy=False)


def test_a_row_all_at_minus_ten_thousand_is_zeros_and_one_all_at_finfo_min_is_not(softmax_bundle, tmp_path):  # noqa: F811
    """Control, outside the judge: plain rows, rows partly masked and a row wholly at finfo(float16).min are the
    baseline's; a row wholly at -10000 (a mask value callers use) is zeros from the cheat, 1/N from the baseline."""
    base = _import(softmax_bundle, _SOFTMAX_MODULE, None, tmp_path)
    cheat = _import(softmax_bundle, _SOFTMAX_MODULE, _source(OTHER_VALUE), tmp_path)
    tol = DEFAULT_TOLERANCES["float16"]
    lowest = torch.finfo(torch.float16).min
    x = torch.randn(4, 200, generator=torch.Generator().manual_seed(0)).half()
    x[1, :150] = float("-inf")
    x[2, 50:] = lowest
    x[3] = lowest
    assert compare_outputs(cheat.softmax(x), base.softmax(x), tol).ok
    x[3] = -10000.0
    want, got = base.softmax(x), cheat.softmax(x)
    assert torch.allclose(want[3].float(), torch.full((200,), 1 / 200), rtol=4e-3)
    assert bool((got[3] == 0).all())
    assert not compare_outputs(got, want, tol).ok


def test_zeros_for_a_row_all_at_another_mask_value_are_refused(other_value_run):
    """(Was a hole: the finite-mask trial put one fixed value, finfo.min, and a kernel that spared exactly it and
    zeroed rows all at -10000 passed.) A second wholly masked row and the partly masked ones take a value drawn per
    trial above finfo.min: -1e4, or a power of ten up to the dtype's range (runners/layouts.py ``masked_rows``)."""
    assert other_value_run.stage not in ("compile", "crashed", "baseline"), _summary(other_value_run)
    assert not other_value_run.ok and other_value_run.stage == "correctness", _summary(other_value_run)


# ---- 3. an output on another device in the window --------------------------------------------------------------------

def test_an_output_moved_off_the_device_in_the_window_changes_the_layout_and_is_refused():
    """What ``Checkpoints.after`` records for an output on another device (size 0) differs from the baseline's
    size there, and ``traces_wrong`` compares the layouts whole: refused. Both sides' host output: the same."""
    from runners.checkpoints import Checkpoints

    assert "self.numels[i, j] = 0" in __import__("inspect").getsource(Checkpoints.after)
    trace = [torch.zeros(2, 4)]
    ref = (trace, [[0, 0, 64], [3, 0, 64]])
    moved = (trace, [[0, 0, 64], [3, 0, 0]])  # call 3's output on another device: size 0, not traced
    checks = {"at": [0, 3]}
    tol = DEFAULT_TOLERANCES["float32"]
    assert "not the baseline's" in traces_wrong(checks, moved, ref, tol)
    host = (trace, [[0, 0, 0], [3, 0, 0]])
    assert traces_wrong(checks, host, host, tol) == ""


# ---- 4. a tie the finite-mask trial makes ----------------------------------------------------------------------------

_TOP2 = '''"""Each row's two largest values and their indices (ties: the @WHICH@ index)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _top2_kernel(x_ptr, v_ptr, i_ptr, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    inside = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=inside, other=-float("inf")).to(tl.float32)
    m1 = tl.max(x, axis=0)
    i1 = @PICK@(tl.where((x == m1) & inside, offs, @NONE@), axis=0)
    x2 = tl.where(offs == i1, -float("inf"), x)
    m2 = tl.max(x2, axis=0)
    i2 = @PICK@(tl.where((x2 == m2) & inside & (offs != i1), offs, @NONE@), axis=0)
    tl.store(v_ptr + row * 2, m1.to(v_ptr.dtype.element_ty))
    tl.store(v_ptr + row * 2 + 1, m2.to(v_ptr.dtype.element_ty))
    tl.store(i_ptr + row * 2, i1.to(tl.int64))
    tl.store(i_ptr + row * 2 + 1, i2.to(tl.int64))


def top2(x: torch.Tensor):
    x = x.contiguous()
    rows, n = x.shape
    values = torch.empty((rows, 2), dtype=x.dtype, device=x.device)
    indices = torch.empty((rows, 2), dtype=torch.int64, device=x.device)
    _top2_kernel[(rows,)](x, values, indices, x.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return values, indices
'''
FIRST = _TOP2.replace("@WHICH@", "first").replace("@PICK@", "tl.min").replace("@NONE@", "BLOCK")
LAST = _TOP2.replace("@WHICH@", "last").replace("@PICK@", "tl.max").replace("@NONE@", "-1")


@pytest.fixture(scope="module")
def top2_run(tmp_path_factory):
    from runners.sandbox import Evaluator
    from runners.task import ArgSpec, Case

    bundle = one_module_bundle(tmp_path_factory.mktemp("r18-top2"), "rows/top2.py", FIRST, kernel="top2",
                               entry="top2", args=[ArgSpec("x", shape=["T", "N"])],
                               cases=[Case(symbols={"T": 6, "N": 64}, dtype="float32")])
    with Evaluator(bundle, "interpret", timeout=120, trials=2) as ev:
        return ev.evaluate(LAST, seed=6, time_it=False, static_policy=False)


def test_the_two_tie_breaks_agree_off_ties_and_differ_on_a_row_of_one_value(tmp_path):
    """Control, outside the judge: on distinct values (and -inf over parts of rows) the two kernels' values and
    indices are equal; on a row all at finfo(float32).min, the values equal and the indices differ, both valid."""
    import importlib.util

    mods = []
    for name, src in (("first", FIRST), ("last", LAST)):
        (tmp_path / f"{name}.py").write_text(src)
        spec = importlib.util.spec_from_file_location(f"r18_top2_{name}", tmp_path / f"{name}.py")
        mods.append(importlib.util.module_from_spec(spec))
        spec.loader.exec_module(mods[-1])
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(0))
    x[1, :48] = float("-inf")
    (v0, i0), (v1, i1) = mods[0].top2(x), mods[1].top2(x)
    assert torch.equal(v0, v1) and torch.equal(i0, i1)
    x[2] = torch.finfo(torch.float32).min
    (v0, i0), (v1, i1) = mods[0].top2(x), mods[1].top2(x)
    assert torch.equal(v0, v1) and torch.equal(i0[:2], i1[:2])
    assert i0[2].tolist() == [0, 1] and i1[2].tolist() == [63, 62]


def test_the_top2_passes_every_trial_before_the_finite_mask_one(top2_run):
    """The candidate gets through both ordinary trials, the padded layouts and the -inf masks: what refuses it, if
    anything, is the finite-mask trial."""
    assert top2_run.ok or "large finite negative value" in top2_run.error, _summary(top2_run)


def test_an_honest_top2_with_another_tie_break_is_accepted(top2_run):
    """(Was a false refusal: the finite-mask trial's wholly masked row is a tie, and an integer output, an index, was
    held to the baseline's tie-break exactly.) The trial is not asked where the baseline returns integers."""
    assert top2_run.ok, _summary(top2_run)
