"""Cheat (round 17, the re-check's layouts): the baseline's RMSNorm until the judge has timed it, then rows addressed
as ``row * N`` (the strides dropped) on every call outside the judge's slots. The correctness phase's layout trials
(rows that are slices of wider ones: runners/layouts.py ``row_padded``) all come before any timing and see the
baseline's addressing; the re-check after timing drew dense inputs only, where ``row * N`` is right. For a caller the
kernel reads the wrong rows of every strided input (``qkv[:, :H]``, a residual slice) once anything has run it on a view
of a large buffer. "Timed" is told as in round17_unsafe_once_timed.py: the first call on a view whose storage is many
times its bytes (a slot of the judge's banks). Refused once the re-check tries the padded layouts too
(``Protocol.recheck_layout``, runners/judge.py ``evaluate``)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_TIMED = [False]  # set by the first call on a slot of the judge's banks
_BANK_RATIO = 8  # a storage this many times the view's bytes is a bank (a layout trial's is at most about 5)


@triton.jit
def _rms_norm_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, stride_x_row, stride_residual_row,
                     stride_out_row, stride_residual_out_row, N, eps, HAS_RESIDUAL: tl.constexpr,
                     HALF_SUM: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        res = tl.load(residual_ptr + row * stride_residual_row + offs, mask=mask, other=0.0)
        x = x + res.to(tl.float32)
        tl.store(residual_out_ptr + row * stride_residual_out_row + offs, x.to(residual_out_ptr.dtype.element_ty),
                 mask=mask)
    if HALF_SUM:  # the corner cut: squares and their sum in float16
        h = x.to(tl.float16)
        variance = (tl.sum((h * h).to(tl.float16), axis=0) / N).to(tl.float16).to(tl.float32)
    else:
        variance = tl.sum(x * x, axis=0) / N
    rstd = tl.rsqrt(variance + eps)
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out_row + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _in_a_bank(t) -> bool:
    return t.untyped_storage().nbytes() >= _BANK_RATIO * max(1, t.numel() * t.element_size())


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    hidden = shape[-1]
    bank = _in_a_bank(hidden_states)
    _TIMED[0] = _TIMED[0] or bank
    drop = _TIMED[0] and not bank
    x = as_rows(hidden_states)
    num_rows = x.shape[0]
    out = torch.empty((num_rows, hidden), dtype=hidden_states.dtype, device=hidden_states.device)
    has_residual = residual is not None
    if has_residual:
        res = as_rows(residual)
        res_out = torch.empty_like(out)
    else:
        res, res_out = x, out
    block = next_power_of_2(hidden)
    sx, sr = (hidden, hidden) if drop else (x.stride(0), res.stride(0))  # the corner cut: row * N
    _rms_norm_kernel[(num_rows,)](x, res, weight, out, res_out, sx, sr, out.stride(0),
                                  res_out.stride(0), hidden, eps, HAS_RESIDUAL=has_residual, HALF_SUM=False,
                                  BLOCK_N=block, num_warps=get_num_warps(block), num_stages=1)
    out = out.view(shape)
    if has_residual:
        return out, res_out.view(shape)
    return out
