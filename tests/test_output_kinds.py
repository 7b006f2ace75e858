"""What an entry may return, through the real evaluator: tensors, numbers, short strings, None, and tuples, lists
or dicts (string keys) of them, each compared item by item with the nesting held to the baseline's; anything else
in the baseline's reply stops the evaluation at stage ``baseline``, saying what it returned (the judge cannot
compare it, and once passed two equal markers for a candidate's dict of zeros: tests/test_judge_attacks_round7.py)."""
from __future__ import annotations

import pytest
import torch

from runners.sandbox import Evaluator
from runners.task import ArgSpec, Case, TaskSpec, write_task

_MODULE = '''import types

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def scale(x):
    y = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return @RETURN@
'''


def _bundle(dest, returns: str):
    (dest / "baseline" / "ops").mkdir(parents=True)
    (dest / "baseline" / "ops" / "scale.py").write_text(_MODULE.replace("@RETURN@", returns))
    write_task(dest, TaskSpec(kernel="scale", module="ops/scale.py", entry="scale", files=["ops/scale.py"],
                              args=[ArgSpec("x", shape=["T", "H"])],
                              cases=[Case(symbols={"T": 3, "H": 40}, dtype="float32")]))
    return dest


def test_a_baseline_that_returns_what_cannot_be_compared_is_refused_at_the_baseline(tmp_path):
    with Evaluator(_bundle(tmp_path, "types.SimpleNamespace(y=y)"), "interpret", timeout=120, trials=1) as ev:
        r = ev.evaluate(ev.baseline, seed=1, time_it=False)
    assert not r.ok and r.stage == "baseline" and "SimpleNamespace" in r.error and "cannot compare" in r.error, (
        r.stage, r.error)


_DICT = '{"y": y, "count": x.numel()}'


@pytest.fixture(scope="module")
def dict_evaluator(tmp_path_factory):
    with Evaluator(_bundle(tmp_path_factory.mktemp("dict"), _DICT), "interpret", timeout=120, trials=1) as ev:
        yield ev


def test_a_baseline_that_returns_a_dict_passes_against_itself(dict_evaluator):
    r = dict_evaluator.evaluate(dict_evaluator.baseline, seed=1, time_it=False)
    assert r.ok, r.error


@pytest.mark.parametrize("candidate, message", [
    ('{"out": y, "count": x.numel()}', "where the baseline returns {'count': a int, 'y': tensor}"),
    ('{"y": y * 0, "count": x.numel()}', "out of tolerance"),
    ('({"y": y, "count": x.numel()},)', "where the baseline returns"),
], ids=["another-key", "zeros", "wrapped"])
def test_a_dict_is_compared_item_by_item_with_its_keys(dict_evaluator, candidate, message):
    r = dict_evaluator.evaluate(dict_evaluator.baseline.replace(_DICT, candidate), seed=2, time_it=False)
    assert not r.ok and r.stage == "correctness" and message in r.error, (r.stage, r.error)


_CAST = '''import torch
import triton
import triton.language as tl


@triton.jit
def _cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, (tl.load(x_ptr + offs, mask=mask) * 2.0).to(y_ptr.dtype.element_ty), mask=mask)


def scale_to(x, out_dtype):
    assert isinstance(out_dtype, torch.dtype), f"out_dtype is {out_dtype!r}"
    y = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    _cast_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y, out_dtype
'''


def test_a_dtype_argument_reaches_the_entry_as_a_dtype(tmp_path):
    """A config scalar ``torch.float16`` (SGLang's ``out_dtype``) is the dtype in the workers, in the correctness
    trials and in the timed slots alike, and a dtype among the outputs crosses back and is compared."""
    from runners.inputs import SlotBank, config_scalar, make_inputs

    (tmp_path / "baseline" / "ops").mkdir(parents=True)
    (tmp_path / "baseline" / "ops" / "cast.py").write_text(_CAST)
    args = [ArgSpec("x", shape=["T", "H"]), ArgSpec("out_dtype", value="torch.float16")]
    case = Case(symbols={"T": 3, "H": 40}, dtype="float32")
    write_task(tmp_path, TaskSpec(kernel="scale_to", module="ops/cast.py", entry="scale_to", files=["ops/cast.py"],
                                  args=args, cases=[case]))
    assert config_scalar("torch.float16") is torch.float16 and config_scalar("torch.nope") == "torch.nope"
    assert make_inputs(args, case, "cpu", 1)["out_dtype"] is torch.float16
    assert all(s["out_dtype"] is torch.float16 for s in SlotBank(args, case, "cpu", 3).slots)
    with Evaluator(tmp_path, "interpret", timeout=120, trials=1) as ev:
        base = ev.evaluate(ev.baseline, seed=1, time_it=False)
        wrong = ev.evaluate(ev.baseline.replace("return y, out_dtype", "return y, torch.float32"), seed=2,
                            time_it=False)
    assert base.ok, base.error
    assert not wrong.ok and "torch.float32" in wrong.error and "torch.float16" in wrong.error, wrong.error


def test_float8_tensors_cross_the_wire_and_are_compared(tmp_path):
    """SGLang's fp8 quantisers return float8 tensors: the wire names the four float8 dtypes, and the comparison and
    the masked trial's finiteness check work on them (torch has no isfinite for float8)."""
    from runners.compare import compare_outputs
    from runners.layouts import padding_like
    from runners.task import Tolerance
    from runners.wire import decode_value, encode_value

    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        t = torch.randn(4, 40).to(dtype)
        back = decode_value(encode_value(tmp_path, f"f{dtype}", t), tmp_path, 1 << 20)
        assert back.dtype == dtype and torch.equal(back.view(torch.uint8), t.view(torch.uint8))
        assert compare_outputs(back, t, Tolerance(0.1, 0.1)).ok
        assert not compare_outputs(torch.zeros_like(t.float()).to(dtype), t, Tolerance(0.01, 0.01)).ok
        assert padding_like(t, 64, torch.Generator().manual_seed(1)).dtype == dtype
