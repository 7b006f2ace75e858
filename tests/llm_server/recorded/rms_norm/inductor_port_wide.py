"""RMSNorm, optionally fused with the residual add that precedes it.

Ported from the shape of torch.compile's persistent reduction: a tile of up to 16 rows per program (8 warps
for long rows), the whole row in registers, fp32 accumulation, the residual sum stored from the same tile.
"""

import torch
import triton
import triton.language as tl

from .utils import as_rows, next_power_of_2


@triton.jit
def _rms_norm_rows_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, stride_x, stride_res,
                          stride_out, stride_res_out, num_rows, N, eps,
                          HAS_RESIDUAL: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < num_rows) & (cols < N)
    x = tl.load(x_ptr + rows * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x += tl.load(residual_ptr + rows * stride_res + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(residual_out_ptr + rows * stride_res_out + cols, x.to(residual_out_ptr.dtype.element_ty),
                 mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1)[:, None] / N + eps)
    w = tl.load(weight_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows * stride_out + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(
    hidden_states: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    residual: torch.Tensor = None,
):
    shape = hidden_states.shape
    hidden = shape[-1]
    assert weight.shape == (hidden,), f"weight must have shape ({hidden},), got {tuple(weight.shape)}"
    x = as_rows(hidden_states)
    num_rows = x.shape[0]
    out = torch.empty((num_rows, hidden), dtype=hidden_states.dtype, device=hidden_states.device)
    has_residual = residual is not None
    if has_residual:
        assert residual.shape == shape, "residual must have the same shape as hidden_states"
        res = as_rows(residual)
        res_out = torch.empty_like(out)
    else:
        res, res_out = x, out
    BLOCK_N = next_power_of_2(hidden)
    ROWS = max(1, min(16, 8192 // BLOCK_N))
    grid = (triton.cdiv(num_rows, ROWS),)
    _rms_norm_rows_kernel[grid](x, res, weight, out, res_out, x.stride(0), res.stride(0), out.stride(0),
                                res_out.stride(0), num_rows, hidden, eps, HAS_RESIDUAL=has_residual, ROWS=ROWS,
                                BLOCK_N=BLOCK_N, num_warps=8 if BLOCK_N >= 2048 else 4)
    out = out.view(shape)
    if has_residual:
        return out, res_out.view(shape)
    return out
