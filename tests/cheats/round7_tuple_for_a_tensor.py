"""Cheat (round 7): the right values in another structure. The baseline returns ``out`` (a tensor) without a
residual and ``(out, new_residual)`` with one; this candidate (an honest kernel otherwise: the control rewrite of
tests/cheats/honest_rewrite.py) returns ``(out,)`` and ``((out,), new_residual)``. Every caller breaks:
``y = rms_norm(x, w); y + 1`` raises TypeError, ``out, res = rms_norm(x, w, residual=r)`` hands a tuple on as the
activations.

runners/judge.py ``_candidate_call`` compares ``tensor_layouts`` (the flat list of (dtype, shape, strides)) and
runners/compare.py ``compare_outputs`` compares ``flatten``-ed lists: the nesting is never compared, though
docs/evaluation.md says "the outputs have the baseline's structure". It must be refused at correctness."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, next_power_of_2


@triton.jit
def _rms_norm_rows_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, n_rows, N, eps,
                          HAS_RESIDUAL: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(residual_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(residual_out_ptr + offs, x.to(residual_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(weight_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    out = x * rstd[:, None] * w[None, :]
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, residual: torch.Tensor = None):
    shape = hidden_states.shape
    hidden = shape[-1]
    x = as_rows(hidden_states).contiguous()
    n_rows = x.shape[0]
    out = torch.empty((n_rows, hidden), dtype=hidden_states.dtype, device=hidden_states.device)
    has_residual = residual is not None
    res = as_rows(residual).contiguous() if has_residual else x
    res_out = torch.empty_like(out) if has_residual else out
    block_n = next_power_of_2(hidden)
    rows = max(1, min(4, 4096 // block_n))
    _rms_norm_rows_kernel[(triton.cdiv(n_rows, rows),)](
        x, res, weight, out, res_out, n_rows, hidden, eps,
        HAS_RESIDUAL=has_residual, ROWS=rows, BLOCK_N=block_n, num_warps=8 if block_n >= 2048 else 4)
    out = out.view(shape)
    return ((out,), res_out.view(shape)) if has_residual else (out,)
