import pytest
import torch

from runners.compare import compare_outputs, inputs_unchanged
from runners.task import DEFAULT_TOLERANCES

DTYPES = ["float32", "float16", "bfloat16"]
SHAPES = [(1,), (3, 5), (7, 33, 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_within_tolerance_passes_and_beyond_fails(dtype, shape):
    tol = DEFAULT_TOLERANCES[dtype]
    ref = (torch.randn(shape) + 2).to(getattr(torch, dtype))
    near = (ref.double() * (1 + tol.rtol / 4)).to(ref.dtype)
    far = (ref.double() * (1 + tol.rtol * 4) + tol.atol * 4).to(ref.dtype)
    ok = compare_outputs(near, ref, tol)
    assert ok.ok and ok.err_ratio <= 1
    bad = compare_outputs(far, ref, tol)
    assert not bad.ok and bad.err_ratio > 1 and "out of tolerance" in bad.message


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_is_never_a_wildcard(dtype):
    tol = DEFAULT_TOLERANCES[dtype]
    ref = torch.randn(8).to(getattr(torch, dtype))
    out = ref.clone()
    out[3] = float("nan")
    assert not compare_outputs(out, ref, tol).ok
    ref_nan = ref.clone()
    ref_nan[3] = float("nan")
    assert compare_outputs(ref_nan.clone(), ref_nan, tol).ok  # NaN where the oracle has NaN: parity
    inf = ref.clone()
    inf[2] = float("inf")
    neg = ref.clone()
    neg[2] = float("-inf")
    assert not compare_outputs(neg, inf, tol).ok


def test_structure_shape_dtype_and_integers_must_match():
    tol = DEFAULT_TOLERANCES["float32"]
    a = torch.randn(4, 4)
    assert not compare_outputs((a, a), a, tol).ok
    assert "shape" in compare_outputs(a.reshape(16), a, tol).message
    assert "dtype" in compare_outputs(a.double(), a, tol).message
    idx = torch.arange(10)
    off = idx.clone()
    off[9] += 1
    assert compare_outputs(idx.clone(), idx, tol).ok and not compare_outputs(off, idx, tol).ok
    assert not compare_outputs(None, a, tol).ok


def test_modified_inputs_are_reported_unless_declared_written():
    before = {"x": torch.randn(3), "eps": 1e-6}
    after = {"x": before["x"].clone(), "eps": 1e-6}
    assert inputs_unchanged(before, after, []) == ""
    after["x"][0] += 1
    assert "x" in inputs_unchanged(before, after, [])
    assert inputs_unchanged(before, after, ["x"]) == ""


def test_zero_bound_is_exact_only_where_the_reference_is_zero():
    from runners.task import Tolerance

    tol = Tolerance(atol=0.0, rtol=1e-3)
    ref = torch.tensor([0.0, 1.0, 2.0])
    assert compare_outputs(torch.tensor([0.0, 1.0000001, 2.0]), ref, tol).ok
    assert not compare_outputs(torch.tensor([1e-9, 1.0, 2.0]), ref, tol).ok


def test_sixteen_bit_outputs_compared_in_float32_give_float64s_verdicts():
    """16-bit outputs are compared in float32 (a tenth of the time at serving sizes): the worst error and its ratio
    to the tolerance agree with float64's, a NaN or Inf out of place is still found, and the tolerance's edge holds."""
    import torch

    from runners.compare import compare_tensor
    from runners.task import Tolerance

    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        ref = (torch.randn(64, 257, generator=g) * 3).to(dtype)
        out = (ref.float() * (1 + 0.004 * torch.randn(64, 257, generator=g))).to(dtype)
        tol = Tolerance(atol=1e-3, rtol=4e-3)
        got = compare_tensor(out, ref, tol, "o")
        err = (out.double() - ref.double()).abs()
        exact = float((err / (tol.atol + tol.rtol * ref.double().abs())).max())
        assert abs(got.err_ratio - exact) <= 1e-6 * exact and got.max_abs_err == float(err.max())
        assert got.ok == (exact <= 1.0)
        for bad in (float("nan"), float("inf")):
            poisoned = out.clone()
            poisoned[3, 5] = bad
            assert not compare_tensor(poisoned, ref, tol, "o").ok
        both = ref.clone()
        both[1, 1] = out[1, 1] = float("nan")  # NaN where the oracle has NaN: compared elsewhere
        assert compare_tensor(out, both, tol, "o").err_ratio <= got.err_ratio
