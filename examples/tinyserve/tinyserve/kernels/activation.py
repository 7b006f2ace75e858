"""Gated activations for the MLP block."""

import torch
import triton
import triton.language as tl

from .utils import as_rows


@triton.jit
def _silu_and_mul_kernel(
    x_ptr,
    out_ptr,
    stride_x_row,
    stride_out_row,
    N,
    BLOCK_N: tl.constexpr,
):
    """out[row, j] = silu(x[row, j]) * x[row, N + j] for one block of columns."""
    row = tl.program_id(0).to(tl.int64)
    col_block = tl.program_id(1)
    offs = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = offs < N

    x_row = x_ptr + row * stride_x_row
    gate = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_row + N + offs, mask=mask, other=0.0).to(tl.float32)
    out = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + row * stride_out_row + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """SwiGLU gate: ``silu(x[..., :I]) * x[..., I:]`` for ``x`` of shape ``[..., 2*I]``."""
    shape = x.shape
    assert shape[-1] % 2 == 0, f"last dim must be even, got {shape[-1]}"
    inter = shape[-1] // 2

    x2d = as_rows(x)
    num_rows = x2d.shape[0]
    out = torch.empty((num_rows, inter), dtype=x.dtype, device=x.device)

    def grid(meta):
        return (num_rows, triton.cdiv(inter, meta["BLOCK_N"]))

    _silu_and_mul_kernel[grid](
        x2d,
        out,
        x2d.stride(0),
        out.stride(0),
        inter,
        BLOCK_N=1024,
        num_warps=4,
        num_stages=1,
    )
    return out.view(*shape[:-1], inter)
