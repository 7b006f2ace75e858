"""Row softmax over the last dim."""

import torch
import triton
import triton.language as tl

from .utils import get_num_warps, next_power_of_2


@triton.jit
def _softmax_kernel(
    x_ptr,
    out_ptr,
    stride_x_row,
    stride_out_row,
    N,
    BLOCK_N: tl.constexpr,
):
    """One program per row; the whole row is held in one block."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N

    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x_max = tl.max(x, axis=0)
    num = tl.exp(x - x_max)
    den = tl.sum(num, axis=0)
    out = num / den
    tl.store(out_ptr + row * stride_out_row + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a 2-D ``[M, N]`` tensor (fp32 math, output in ``x.dtype``)."""
    assert x.dim() == 2, f"expected a 2-D tensor, got shape {tuple(x.shape)}"
    if x.stride(-1) != 1:
        x = x.contiguous()
    num_rows, num_cols = x.shape
    out = torch.empty((num_rows, num_cols), dtype=x.dtype, device=x.device)

    BLOCK_N = next_power_of_2(num_cols)
    num_warps = get_num_warps(BLOCK_N)
    grid = (num_rows,)
    _softmax_kernel[grid](
        x,
        out,
        x.stride(0),
        out.stride(0),
        num_cols,
        BLOCK_N=BLOCK_N,
        num_warps=num_warps,
        num_stages=1,
    )
    return out
