"""RMSNorm, optionally fused with the residual add that precedes it."""

import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2


@triton.jit
def _rms_norm_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    out_ptr,
    residual_out_ptr,
    stride_x_row,
    stride_residual_row,
    stride_out_row,
    stride_residual_out_row,
    N,
    eps,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """One program per row: out = x / sqrt(mean(x^2) + eps) * weight."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N

    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        res = tl.load(residual_ptr + row * stride_residual_row + offs, mask=mask, other=0.0)
        x = x + res.to(tl.float32)
        tl.store(
            residual_out_ptr + row * stride_residual_out_row + offs,
            x.to(residual_out_ptr.dtype.element_ty),
            mask=mask,
        )

    variance = tl.sum(x * x, axis=0) / N
    rstd = tl.rsqrt(variance + eps)
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    out = x * rstd * w
    tl.store(out_ptr + row * stride_out_row + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(
    hidden_states: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    residual: torch.Tensor = None,
):
    """RMSNorm over the last dim.

    Returns ``out`` when ``residual`` is None, otherwise ``(out, new_residual)``
    with ``new_residual = hidden_states + residual`` and ``out = rms_norm(new_residual)``.
    """
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
        # Unused when HAS_RESIDUAL is False; any valid pointer will do.
        res = x
        res_out = out

    BLOCK_N = next_power_of_2(hidden)
    num_warps = get_num_warps(BLOCK_N)
    grid = (num_rows,)
    _rms_norm_kernel[grid](
        x,
        res,
        weight,
        out,
        res_out,
        x.stride(0),
        res.stride(0),
        out.stride(0),
        res_out.stride(0),
        hidden,
        eps,
        HAS_RESIDUAL=has_residual,
        BLOCK_N=BLOCK_N,
        num_warps=num_warps,
        num_stages=1,
    )

    out = out.view(shape)
    if has_residual:
        return out, res_out.view(shape)
    return out
