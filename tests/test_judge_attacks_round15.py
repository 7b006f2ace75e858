"""Round 15: rounds 13 and 14's holes in the whole-error check at the window's small scales, as cheating kernels run
through the judge.

Round 13 (tests/test_judge_attacks_round13.py section 4) and round 14 (tests/test_judge_attacks_round14.py section
1) closed them with unit tests on runners/compare.py and runners/openings.py alone: at the judge's window's smallest
input scales (one scale a pass, down to 1e-3) a linear op's outputs all sit under a bfloat16 ``atol``, and zeros
passed every opened chunk (round 13: ``scale_ratios``, ``first_bad_row`` in ``compare_chunks``); an output more than
half zeros at the case's first trial had a scale of 0 and so no whole-error check at all (round 14: ``output_scales``
of the nonzero magnitudes). Here each is a candidate module in tests/cheats/ (round13_zeros_when_the_input_is_small.py
on a per-channel scale, round14_relu_zeros_when_small.py on a ReLU with its dropout mask: right at unit scale, zeros
for every row whose outputs are all under 0.9 atol), judged by the real evaluator on the timed CPU stand-in
(tests/test_judge_attacks_round4.py ``_timed_judge``) at a secret whose window draws such a scale in one of its
passes; a control shows what each does outside the judge. Tried on a scratch copy with each fix taken out: without
``first_bad_row`` in ``compare_chunks`` both cheats were accepted (ok, stage done); with ``output_scales`` the median
of every magnitude the ReLU's was (the linear op's, whose median is not 0, still refused).

The secret is searched, as rounds 10 and 13 search theirs, with the judge's own draws (runners/inputs.py
``make_inputs`` and ``SlotBank.fill``, the slots shown from runners/judge_clock.py ``_corroborate``'s seeds): the
correctness trials the cheats pass (trial 0 at unit scale, the layout trial at its own scale), a pass of the window
at a scale small enough, and slots shown in full that pass ``compare_outputs`` although all their rows but the wide
one are zeros. That last is worth knowing by itself: a shown slot's whole error is one L2 over the slot, and the wide
row the judge plants in every slot (a scale of its own and a dynamic range, runners/inputs.py ``_structured_rows``)
outweighs the zeroed rows; the openings, each chunk held on its own, are what refuse these cheats (where an output
has rows of nodes to open: not at decode sizes' thousands of slots).
"""
from __future__ import annotations

import json

import pytest
import torch
from conftest import CHEATS
from test_judge_attacks_round7 import _load, one_module_bundle

from runners.compare import compare_outputs, output_scales
from runners.inputs import SCALE_LOG10, SlotBank, make_inputs
from runners.protocol import trial_seed
from runners.task import DEFAULT_TOLERANCES, ArgSpec, Case

BF16 = DEFAULT_TOLERANCES["bfloat16"]  # atol 1e-2
SYMBOLS = {"T": 4, "H": 64}
CASE = Case(symbols=dict(SYMBOLS), dtype="bfloat16")
COUNT, REVEAL, ROUNDS = 12, 2, 3  # the window of the runs below: 12 slots, 2 shown in full a pass, 3 passes
# the clock's verdict kept wide (round 8's _QUIET): the stand-in's host clock is not what these runs are about
NUMBERS = {"max_slots": 12, "max_window_slots": COUNT, "reveal_slots": REVEAL, "corroboration_tolerance": 5.0}
SMALL = 9e-3  # the cheats' "too small to matter": a row whose outputs are all under it (0.9 atol) is written as zeros

# channel_scale: each row of x times a per-channel weight (a LayerScale, a norm's weight applied), a linear op
SCALE_ARGS = [ArgSpec("x", shape=["T", "H"]), ArgSpec("w", shape=["H"], vary=False)]
_CHANNEL_SCALE = '''"""Each row of x times the per-channel weight w."""
import torch
import triton
import triton.language as tl


@triton.jit
def _channel_scale_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_o, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + offs, (x * w).to(out_ptr.dtype.element_ty), mask=mask)


def channel_scale(x, w):
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _channel_scale_kernel[(rows,)](x, w, out, x.stride(0), out.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return out
'''

# relu_dropout: 2 relu(x) where keep is 1, else 0; about three quarters of its output are zeros
RELU_ARGS = [ArgSpec("x", shape=["T", "H"]), ArgSpec("keep", shape=["T", "H"], dtype="int8", low=0, high=2)]
_RELU_DROPOUT = '''"""2 relu(x) where keep is 1, else 0: a ReLU with its dropout mask applied (p = 1/2)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_dropout_kernel(x_ptr, keep_ptr, out_ptr, stride_x, stride_k, stride_o, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    keep = tl.load(keep_ptr + row * stride_k + offs, mask=mask, other=0)
    out = tl.where(keep != 0, tl.maximum(x, 0.0) * 2.0, 0.0)
    tl.store(out_ptr + row * stride_o + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def relu_dropout(x, keep):
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _relu_dropout_kernel[(rows,)](x, keep, out, x.stride(0), keep.stride(0), out.stride(0), n,
                                  BLOCK=triton.next_power_of_2(n))
    return out
'''


def _scale_op(a: dict) -> torch.Tensor:
    return a["x"].float() * a["w"].float()


def _relu_op(a: dict) -> torch.Tensor:
    return torch.where(a["keep"] != 0, a["x"].float().clamp_min(0) * 2, 0.0)


def _honest(op, a: dict) -> torch.Tensor:
    """The baseline's outputs: the op in float32, rounded once."""
    return op(a).bfloat16()


def _cheats(op, a: dict) -> torch.Tensor:
    """The cheats' outputs: zeros in every row whose float32 outputs are all under ``SMALL``."""
    out = op(a)
    return torch.where(out.abs().amax(-1, keepdim=True) < SMALL, 0.0, out).bfloat16()


def _window_pass(args: list, secret: int, round_: int) -> tuple[list[dict], list[int]]:
    """The inputs of each slot of a pass of the judge's window (runners/judge_clock.py ``_corroborate``: one case,
    index 0; the worker fills its bank with the seed of the timed request) and the slots it shows in full."""
    bank = SlotBank(args, CASE, "cpu", COUNT, per_slot_scales=False)
    bank.fill(trial_seed(secret, 50_000 + round_, 0))
    g = torch.Generator().manual_seed(trial_seed(secret, 60_000 + round_, 0))
    return bank.slots, sorted(torch.randperm(COUNT, generator=g)[:REVEAL].tolist())


def _window_scale(secret: int, round_: int) -> float:
    """The input scale of a pass (``SlotBank.fill``: the first draw of the host's generator, for ``x``)."""
    lo, hi = SCALE_LOG10
    host = torch.Generator().manual_seed(trial_seed(secret, 50_000 + round_, 0))
    return 10 ** (lo + (hi - lo) * float(torch.rand(1, generator=host)))


def _zeroed_rows(op, a: dict) -> int:
    return int((_cheats(op, a) != _honest(op, a)).any(-1).sum())


def _secret(args: list, op) -> tuple[int, int]:
    """The first secret (and the pass) at which the cheat, as the judge would see it: passes the correctness trials
    (trial 0; the layout trial, held to the whole-error check at its own scale); has rows zeroed in a pass of the
    window besides the near-zero one (whose zeros are below any check); and passes every slot shown in full."""
    for secret in range(1, 3000):
        if min(_window_scale(secret, r) for r in range(ROUNDS)) > 3e-3:  # no pass small enough: quickly
            continue
        first = output_scales([_honest(op, make_inputs(args, CASE, "cpu", trial_seed(secret, 0, 0), 0)), []])
        layout = make_inputs(args, CASE, "cpu", trial_seed(secret, 1, 0), 1)
        if not compare_outputs(_cheats(op, layout), _honest(op, layout), BF16, first).ok:
            continue
        hit = None
        for r in range(ROUNDS):
            slots, shown = _window_pass(args, secret, r)
            if not all(compare_outputs(_cheats(op, slots[k]), _honest(op, slots[k]), BF16, first).ok
                       for k in shown):
                break
            if hit is None and any(_zeroed_rows(op, a) >= 2 for a in slots):
                hit = r
        else:
            if hit is not None:
                return secret, hit
    raise AssertionError("no secret found")


def _outside_the_judge(module_path, cheat_name: str, entry: str, args: list, secret: int, round_: int) -> dict:
    """The baseline's and the cheat's modules on the secret's first trial and on the slots of its window pass."""
    base = getattr(_load(module_path, f"r15_{entry}_base"), entry)
    cheat = getattr(_load(CHEATS / cheat_name, f"r15_{entry}_cheat"), entry)
    unit = make_inputs(args, CASE, "cpu", trial_seed(secret, 0, 0), 0)
    slots, shown = _window_pass(args, secret, round_)
    return {"unit": (unit, cheat(**unit), base(**unit)), "slots": [(a, cheat(**a), base(**a)) for a in slots],
            "shown": shown}


def _check_the_control(seen: dict, op) -> None:
    """Right at unit scale; at the window's pass, rows of zeros where the honest outputs are not (a relative error of
    1 on each), every zero within ``atol`` element by element, and the slots shown in full passing their whole-error
    check: only the openings can see it. (The interpreter rounds float32 to bfloat16 its own way: the baseline's
    outputs are the op's within the tolerance, the cheat's the baseline's bit for bit outside its zeroed rows.)"""
    unit, got, want = seen["unit"]
    assert torch.equal(got, want) and compare_outputs(want, _honest(op, unit), BF16).ok  # right at unit scale
    first = output_scales([want, []])
    zeroed = 0
    for a, got, want in seen["slots"]:
        assert compare_outputs(want, _honest(op, a), BF16).ok
        rows = op(a).abs().amax(-1) < SMALL  # the rows the cheat zeroes
        assert torch.equal(got[~rows], want[~rows]) and bool((got[rows] == 0).all())
        assert compare_outputs(got, want, BF16).ok  # element by element: every zero under atol
        if int(rows.sum()) >= 2:  # besides the near-zero row
            zeroed += 1
            err = (got[rows].float() - want[rows].float()).norm() / want[rows].float().norm()
            assert float(err) == 1.0
    assert zeroed >= 1
    for k in seen["shown"]:
        _, got, want = seen["slots"][k]
        assert compare_outputs(got, want, BF16, first).ok  # one L2 over the slot: the wide row outweighs the zeros


# ---- the bundles, the secrets and the judge's verdicts -------------------------------------------------------------

ZEROS, SCALE_MODULE = "round13_zeros_when_the_input_is_small.py", "ops/channel_scale.py"
RELU, RELU_MODULE = "round14_relu_zeros_when_small.py", "acts/relu_dropout.py"


@pytest.fixture(scope="module")
def zeros_secret() -> tuple[int, int]:
    return _secret(SCALE_ARGS, _scale_op)


@pytest.fixture(scope="module")
def relu_secret() -> tuple[int, int]:
    return _secret(RELU_ARGS, _relu_op)


@pytest.fixture(scope="module")
def scale_bundle(tmp_path_factory):
    return one_module_bundle(tmp_path_factory.mktemp("r15-scale"), SCALE_MODULE, _CHANNEL_SCALE,
                             kernel="channel_scale", entry="channel_scale", args=SCALE_ARGS, cases=[CASE])


@pytest.fixture(scope="module")
def relu_bundle(tmp_path_factory):
    return one_module_bundle(tmp_path_factory.mktemp("r15-relu"), RELU_MODULE, _RELU_DROPOUT, kernel="relu_dropout",
                             entry="relu_dropout", args=RELU_ARGS, cases=[CASE])


@pytest.fixture(scope="module")
def judged(scale_bundle, relu_bundle, zeros_secret, relu_secret, tmp_path_factory) -> dict:
    """Each cheat at its secret, a judge of its own on the timed stand-in; the two judges at once (their verdicts
    come from the window's outputs, before the clock's, and most of each run is starting processes)."""
    from concurrent.futures import ThreadPoolExecutor

    from test_judge_attacks_round4 import _timed_judge

    jobs = {"zeros": (scale_bundle, ZEROS, zeros_secret[0]), "relu": (relu_bundle, RELU, relu_secret[0])}
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {name: pool.submit(_timed_judge, bundle, tmp_path_factory.mktemp(f"r15-{name}-timed"),
                                     [((CHEATS / cheat).read_text(), "verify", secret, NUMBERS)], SYMBOLS)
                   for name, (bundle, cheat, secret) in jobs.items()}
        return {name: future.result()[0] for name, future in futures.items()}


def _refused_by_an_opened_chunks_whole_error(ev: dict) -> None:
    assert not ev["ok"] and ev["stage"] == "timing", json.dumps(ev)
    assert "opened chunk of the judge's window" in ev["error"] and "the error of the whole output" in ev["error"], \
        json.dumps(ev)


# ---- 1. round 13: a linear op's rows written as zeros where its outputs are small --------------------------------

def test_the_zeros_cheat_is_right_at_unit_scale_and_zeros_at_the_windows_small_scale(scale_bundle, zeros_secret):
    """Control, outside the judge: the cheat's Triton kernel on the secret's first trial (unit scale) and on the
    slots of its window's small pass, against the baseline's."""
    secret, round_ = zeros_secret
    assert _window_scale(secret, round_) < 3e-3
    _check_the_control(_outside_the_judge(scale_bundle / "baseline" / SCALE_MODULE, ZEROS, "channel_scale",
                                          SCALE_ARGS, secret, round_), _scale_op)


# Was a hole (round 13, closed as it ran; tests/test_judge_attacks_round13.py section 4): with each opened chunk held
# element by element only, every zero under atol passed and the shown slots' one L2 passed too: accepted. Refused by
# an opened chunk's whole error at the window's scale (runners/compare.py scale_ratios, first_bad_row)
def test_the_zeros_cheat_is_refused_by_the_openings(judged):
    _refused_by_an_opened_chunks_whole_error(judged["zeros"])


# ---- 2. round 14: a ReLU's output, mostly zeros, written as zeros where its outputs are small ---------------------

def test_the_relu_cheat_is_right_at_unit_scale_and_zeros_at_the_windows_small_scale(relu_bundle, relu_secret):
    """Control, outside the judge, as for round 13's; and the honest output at the first trial is mostly zeros:
    its median magnitude is 0, the scale the judge took before round 14's fix."""
    secret, round_ = relu_secret
    seen = _outside_the_judge(relu_bundle / "baseline" / RELU_MODULE, RELU, "relu_dropout", RELU_ARGS, secret,
                              round_)
    _check_the_control(seen, _relu_op)
    first = seen["unit"][2]
    assert float((first == 0).float().mean()) > 0.6 and float(first.float().abs().median()) == 0.0
    assert output_scales(first)[0] > 0.1  # the scale of what it holds


# Was a hole (round 14, closed as it ran; tests/test_judge_attacks_round14.py section 1): the first trial's scale was
# the median magnitude, 0 here, so no ratio was made and neither the shown slots nor the opened chunks had a whole-
# error check: accepted. Refused with the scale of the nonzero magnitudes (runners/compare.py output_scales)
def test_the_relu_cheat_is_refused(judged):
    _refused_by_an_opened_chunks_whole_error(judged["relu"])

