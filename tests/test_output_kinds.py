"""What an entry may return, through the real evaluator: tensors, numbers, short strings, None, and tuples, lists
or dicts (string keys) of them, each compared item by item with the nesting held to the baseline's; anything else
in the baseline's reply stops the evaluation at stage ``baseline``, saying what it returned (the judge cannot
compare it, and once passed two equal markers for a candidate's dict of zeros: tests/test_judge_attacks_round7.py)."""
from __future__ import annotations

import pytest

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
    with Evaluator(_bundle(tmp_path, "types.SimpleNamespace(y=y)"), "interpret", timeout=120, trials=1,
                   spare=False) as ev:
        r = ev.evaluate(ev.baseline, seed=1, time_it=False)
    assert not r.ok and r.stage == "baseline" and "SimpleNamespace" in r.error and "cannot compare" in r.error, (
        r.stage, r.error)


_DICT = '{"y": y, "count": x.numel()}'


@pytest.fixture(scope="module")
def dict_evaluator(tmp_path_factory):
    with Evaluator(_bundle(tmp_path_factory.mktemp("dict"), _DICT), "interpret", timeout=120, trials=1,
                   spare=False) as ev:
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
