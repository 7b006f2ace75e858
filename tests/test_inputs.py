import pytest
import torch

from runners.inputs import case_shapes, eval_dim, make_inputs
from runners.task import ArgSpec, Case

ARGS = [ArgSpec("x", shape=["T", "2*I"]), ArgSpec("w", shape=["I"], dtype="float32"),
        ArgSpec("idx", shape=["T"], dtype="int64", low=0, high=7), ArgSpec("eps", value=1e-6),
        ArgSpec("r", shape=["T", "2*I"], when="residual")]


@pytest.mark.parametrize("dim, want", [(5, 5), ("T", 3), ("2*I", 10), ("I//2+T", 5), ("T*T-1", 8)])
def test_shape_expressions(dim, want):
    assert eval_dim(dim, {"T": 3, "I": 5}) == want


@pytest.mark.parametrize("dim", ["T**2", "__import__('os')", "I"])
def test_shape_expressions_refuse_anything_else(dim):
    with pytest.raises((ValueError, KeyError)):
        eval_dim(dim, {"T": 3})


def test_inputs_follow_the_case():
    kw = make_inputs(ARGS, Case({"T": 3, "I": 5}, "float16"), "cpu", seed=1)
    assert list(kw) == ["x", "w", "idx", "eps"]  # r omitted: the case has no residual
    assert kw["x"].shape == (3, 10) and kw["x"].dtype == torch.float16
    assert kw["w"].dtype == torch.float32 and kw["idx"].dtype == torch.int64
    assert int(kw["idx"].min()) >= 0 and int(kw["idx"].max()) < 7
    with_r = make_inputs(ARGS, Case({"T": 3, "I": 5, "residual": True}, "bfloat16"), "cpu", seed=1)
    assert with_r["r"].shape == (3, 10) and with_r["r"].dtype == torch.bfloat16
    assert case_shapes(ARGS, Case({"T": 2, "I": 4}, "float32"))["x"] == (2, 8)


def test_inputs_are_fresh_per_seed_and_reproducible():
    case = Case({"T": 4, "I": 8}, "float32")
    a, b, c = (make_inputs(ARGS, case, "cpu", seed=s) for s in (1, 1, 2))
    assert torch.equal(a["x"], b["x"]) and not torch.equal(a["x"], c["x"])
    assert a["x"].abs().sum() > 0  # never zeros: zeros hide unwritten outputs
