"""Correctness: compare a candidate's outputs with the oracle's, element by element.

NaN and Inf must appear in the same places (never a wildcard); floating outputs must satisfy
``|out - ref| <= atol + rtol * |ref|``; integer and bool outputs must be equal.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .task import Tolerance


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float = 0.0
    err_ratio: float = 0.0  # max over elements of |err| / (atol + rtol*|ref|): at most 1 passes
    message: str = ""


def flatten(out) -> list:
    """Outputs as a flat list: a tensor, or a tuple/list/dict of tensors and scalars (a dict's values in the order
    of its keys), or None."""
    if isinstance(out, (tuple, list)):
        return [x for item in out for x in flatten(item)]
    if isinstance(out, dict):
        return [x for k in sorted(out, key=str) for x in flatten(out[k])]
    return [out]


def compare_tensor(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, what: str,
                   atol_scale: float = 1.0, first_scale: float = 0.0) -> Comparison:
    if not isinstance(out, torch.Tensor):
        return Comparison(False, message=f"{what}: expected a tensor, got {type(out).__name__}")
    if out.shape != ref.shape:
        return Comparison(False, message=f"{what}: shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Comparison(False, message=f"{what}: dtype {out.dtype} != expected {ref.dtype}")
    out, ref = out.detach(), ref.detach()  # compared where they live: large outputs stay on the device
    if not ref.dtype.is_floating_point:
        wrong = int((out != ref).sum())
        return Comparison(wrong == 0, message="" if not wrong else f"{what}: {wrong} elements differ (exact match required)")
    # 16-bit outputs are compared in float32, which holds them exactly and their difference to within 2**-24 of it
    # (a tenth of the time of float64 on a 16M-element output, where the comparison was most of a search
    # evaluation's correctness phase); wider ones in float64
    work = torch.float32 if ref.dtype in (torch.float16, torch.bfloat16) else torch.float64
    o, r = out.to(work), ref.to(device=out.device, dtype=work)
    finite = None  # None: every value of both is finite (the usual case: no masks or gathers needed)
    if not (bool(torch.isfinite(r).all()) and bool(torch.isfinite(o).all())):
        nan_o, nan_r = torch.isnan(o), torch.isnan(r)
        if not torch.equal(nan_o, nan_r):
            return Comparison(False, float("nan"), float("inf"),
                              f"{what}: NaN in {int(nan_o.sum())} places, expected {int(nan_r.sum())}")
        inf_o, inf_r = torch.isinf(o), torch.isinf(r)
        if not torch.equal(inf_o, inf_r) or not torch.equal(o[inf_o], r[inf_r]):
            return Comparison(False, float("inf"), float("inf"), f"{what}: Inf positions or signs differ")
        finite = ~(nan_r | inf_r)
        o, r = torch.where(finite, o, 0.0), torch.where(finite, r, 0.0)  # equal there: no error, no bound
    count = int(finite.sum()) if finite is not None else r.numel()
    if count == 0:
        return Comparison(True)
    err = (o - r).abs_()
    ref_abs = r.abs()
    bound = ref_abs * tol.rtol + tol.atol
    # Element by element: a zero bound (atol 0 and a zero reference) demands an exact match there only.
    if tol.atol > 0:
        ratio = err / bound
    else:
        ratio = torch.where(bound > 0, err / bound.clamp_min(1e-300), torch.where(err == 0, 0.0, float("inf")))
    worst = float(ratio.max())
    ok = worst <= 1.0
    msg = "" if ok else (f"{what}: {int((ratio > 1).sum())} of {count} elements out of tolerance, "
                         f"max abs err {float(err.max()):.3g} (atol {tol.atol:g}, rtol {tol.rtol:g})")
    if ok and atol_scale < 1.0:
        ok, msg = _whole_output(err, ref_abs, count, tol, ref.dtype, what, atol_scale, first_scale)
    return Comparison(ok, float(err.max()), worst, msg)


def _whole_output(err: torch.Tensor, ref_abs: torch.Tensor, count: int, tol: Tolerance, dtype: torch.dtype,
                  what: str, atol_scale: float, first_scale: float = 0.0) -> tuple[bool, str]:
    """The error of the whole output against its size, where the output is ``atol_scale`` times smaller than at the
    case's first trial: ``||out - ref|| <= 2 max(rtol, eps) ||ref||`` plus, per element (in quadrature), ``atol``
    scaled down with the output and four of the dtype's smallest steps. ``atol`` is absolute: where the judge's
    trials scale the inputs down 1000-fold every output may sit below it, and a kernel that wrote zeros for every
    |output| under ``atol`` passed element by element at 100 % relative error (tests/test_judge_attacks_round8.py).
    Rounding is relative to the values summed, so an honest kernel's error shrinks with them, sums that cancel to
    about zero included (at the first trial's scale the bound is implied by the elementwise one); the smallest
    steps (a float16 subnormal is 6e-8) keep outputs at the dtype's own resolution from being held to more. ``count``:
    the finite elements (the others are zero in ``err`` and ``ref_abs``)."""
    size = float(torch.linalg.vector_norm(ref_abs, dtype=torch.float64))
    allowed = _whole_bound(size, count ** 0.5, tol, dtype, atol_scale, first_scale)
    got = float(torch.linalg.vector_norm(err, dtype=torch.float64))
    if got <= allowed:
        return True, ""
    return False, (f"{what}: the error of the whole output is {got / size if size else float('inf'):.3g} of its "
                   f"size (L2), allowed {allowed / size if size else 0.0:.3g}: right only where the tolerance's "
                   f"absolute part ({tol.atol:g}) covers it")


# a float32 step of the output's size at the case's first trial that an honest kernel's error may keep whatever the
# inputs' scale: an absolute error of the compute precision, as tanh written 2 sigmoid(2x) - 1 has about one step
# of 1 at any x (round 14); far below a wrong output's error (round 13's zeros: the output's own size)
FIRST_SCALE_STEPS = 2.0 ** -23  # one step: the tanh's error is about 0.4 of it (RMS); the smaller half of an output
# a million times smaller than at the first trial, zeroed, errs by 2.3 (tests/test_review_round8_fixes.py)


def _whole_bound(size, root_count, tol: Tolerance, dtype: torch.dtype, atol_scale: float, first_scale: float = 0.0):
    """The L2 error allowed to an output of L2 ``size`` and ``root_count`` = sqrt(finite elements) (floats or
    tensors of them): twice the relative tolerance (at least the dtype's eps) of its size, plus per element ``atol``
    scaled with the output, a float32 step of its size at the first trial (``FIRST_SCALE_STEPS``) and the
    dtype's subnormal spacing (bf16, fp16, fp32 alike), in quadrature."""
    finfo = torch.finfo(dtype)
    floor = 4.0 * float(finfo.smallest_normal) * float(finfo.eps) + FIRST_SCALE_STEPS * (first_scale or 0.0)
    return 2.0 * max(tol.rtol, float(finfo.eps)) * size + (tol.atol * atol_scale + floor) * root_count


def first_bad_row(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, atol_scale: float,
                  first_scale: float = 0.0) -> int | None:
    """``_whole_output`` on each row of two (rows, n) tensors already equal element by element within ``tol`` (the
    same NaN and Inf places): the first row whose error is too large for its size at ``atol_scale``, else None. The
    window's opened chunks (runners/openings.py ``compare_chunks``), where the window's outputs are smaller than at
    the case's first trial (round 13: a linear op's output written as zeros passed every chunk under ``atol``)."""
    o, r = out.detach().to(torch.float64), ref.detach().to(torch.float64)
    finite = torch.isfinite(o) & torch.isfinite(r)
    err = torch.where(finite, o - r, 0.0).abs()
    size = torch.linalg.vector_norm(torch.where(finite, r, 0.0), dim=1)
    allowed = _whole_bound(size, finite.sum(1).to(torch.float64).sqrt(), tol, ref.dtype, atol_scale, first_scale)
    bad = (torch.linalg.vector_norm(err, dim=1) > allowed).nonzero().flatten()
    return int(bad[0]) if bad.numel() else None


def scale_ratios(shown_refs: list, first_scales: list | None) -> dict[int, tuple[float, float]]:
    """Per output position, how much smaller the window's outputs are than at the case's first trial (at most 1),
    with that first scale: the median over the slots shown in full (the oracle's whole outputs; one input scale a
    window pass) of each output's scale (``output_scales``), against ``first_scales``."""
    if not first_scales or not shown_refs:
        return {}
    per = [output_scales(r) for r in shown_refs]
    ratios = {}
    for p, first in enumerate(first_scales):
        now = [s[p] for s in per if p < len(s) and s[p] is not None]
        if first and now:
            ratios[p] = (min(1.0, float(torch.tensor(now).median()) / first), first)
    return ratios


def compare_outputs(out, ref, tol: Tolerance | Callable[[torch.dtype], Tolerance],
                    first_scales: list | None = None) -> Comparison:
    """Every output against the oracle's; ``tol`` one tolerance, or the tolerance of an output's dtype (a float32
    rstd of a float16 case is held to float32's: ``TaskSpec.tolerances_for``). ``first_scales``: each output's size
    at the case's first trial (``output_scales``), against which a smaller output's whole error is also held
    (``_whole_output``)."""
    outs, refs = flatten(out), flatten(ref)
    if len(outs) != len(refs):
        return Comparison(False, message=f"returned {len(outs)} outputs, expected {len(refs)}")
    now = output_scales(ref) if first_scales else []
    worst = Comparison(True)
    for i, (o, r) in enumerate(zip(outs, refs)):
        if isinstance(r, torch.Tensor):
            first = first_scales[i] if first_scales and i < len(first_scales) else None
            ratio = min(1.0, now[i] / first) if first and now[i] is not None else 1.0
            c = compare_tensor(o, r, tol(r.dtype) if callable(tol) else tol, f"output {i}", ratio, first or 0.0)
        elif not _same_number(o, r, tol(_narrowest_holding(r)) if callable(tol) else tol):
            c = Comparison(False, message=f"output {i}: {o!r} != expected {r!r}")
        else:
            continue
        if not c.ok:
            return c
        if c.err_ratio >= worst.err_ratio:
            worst = Comparison(True, max(worst.max_abs_err, c.max_abs_err), c.err_ratio)
    return worst


def _narrowest_holding(value) -> torch.dtype:
    """The narrowest float dtype that holds the oracle's number exactly: the tolerance a float returned as a number
    is held to (a bfloat16 sum's ``.item()`` at bfloat16's, a double at float64's: held at float32's, a float32
    sum cast to a double passed as a number while refused as a float64 tensor; round 8's review)."""
    if isinstance(value, float) and math.isfinite(value):
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            if float(torch.tensor(value, dtype=dtype)) == value:
                return dtype
    return torch.float64


def _same_number(o, r, tol: Tolerance) -> bool:
    """A non-tensor output against the oracle's: a float within the tolerance (``_narrowest_holding``; a float summed
    in another order was refused against the baseline itself when numbers were compared exactly), NaN where the
    oracle's is NaN, an infinity exactly; anything else (int, bool, str, None) equal and of the same type."""
    if isinstance(r, float) and isinstance(o, float):
        if math.isnan(r) or math.isnan(o):
            return math.isnan(r) and math.isnan(o)
        if math.isinf(r) or math.isinf(o):
            return o == r
        return abs(o - r) <= tol.atol + tol.rtol * abs(r)
    return type(o) is type(r) and o == r


def inputs_unchanged(before: dict, after: dict, written: list[str]) -> str:
    """Empty string when every input not declared as written is bit-identical after the call."""
    for name, value in before.items():
        if name in written or not isinstance(value, torch.Tensor):
            continue
        if not torch.equal(value, after[name]):  # harness inputs are finite, so equal is exact
            return f"input `{name}` was modified, but the spec does not list it as written"
    return ""


def _finite_magnitudes(t) -> torch.Tensor | None:
    """|values| of a floating tensor's finite entries (at most ~1 M of them, evenly spaced); None for anything else."""
    if not (isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.numel()):
        return None
    flat = t.detach().reshape(-1)
    flat = flat[:: max(1, flat.numel() // 1_000_000)].float().abs()
    return flat[torch.isfinite(flat)]


def output_scales(out) -> list:
    """Each output's median magnitude over its finite nonzero values (floating tensors; None for the others and for
    one that is all zeros): an output mostly zeros (a ReLU after a negative bias, a masked output) has the size of
    what it holds, not 0, which made no ratio and so no whole-output check (round 14)."""
    parts = [_finite_magnitudes(t) for t in flatten(out)]
    parts = [p[p > 0] if p is not None else None for p in parts]
    return [float(p.median()) if p is not None and p.numel() else None for p in parts]


def output_scale(out) -> float | None:
    """The median magnitude of the finite values of the floating outputs (on at most ~1 M of them, evenly spaced):
    the scale against which a tolerance's ``atol`` means something."""
    parts = [p for p in (_finite_magnitudes(t) for t in flatten(out)) if p is not None]
    values = torch.cat(parts) if parts else None
    return float(values.median()) if values is not None and values.numel() else None
