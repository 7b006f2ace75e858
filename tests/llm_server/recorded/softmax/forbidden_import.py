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
    LOOPED: tl.constexpr,
):
    """One program per row. Short rows are held whole; long rows are streamed in BLOCK_N chunks with an
    online max and sum (pass 1), then normalised (pass 2, mostly from L2)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x_row
    o_row = out_ptr + row * stride_out_row
    offs = tl.arange(0, BLOCK_N)
    if LOOPED:
        m = tl.full([BLOCK_N], -float("inf"), tl.float32)
        s = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, N, BLOCK_N):
            x = tl.load(x_row + start + offs, mask=start + offs < N, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            alive = m_new > -float("inf")
            s = tl.where(alive, s * tl.exp(m - m_new) + tl.exp(x - m_new), s)
            m = m_new
        g = tl.max(m, axis=0)
        den = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - g), 0.0), axis=0)
        for start in range(0, N, BLOCK_N):
            mask = start + offs < N
            x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(o_row + start + offs, (tl.exp(x - g) / den).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        x_max = tl.max(x, axis=0)
        num = tl.exp(x - x_max)
        den = tl.sum(num, axis=0)
        tl.store(o_row + offs, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a 2-D ``[M, N]`` tensor (fp32 math, output in ``x.dtype``)."""
    assert x.dim() == 2, f"expected a 2-D tensor, got shape {tuple(x.shape)}"
    if x.stride(-1) != 1:
        x = x.contiguous()
    num_rows, num_cols = x.shape
    out = torch.empty((num_rows, num_cols), dtype=x.dtype, device=x.device)

    looped = num_cols > 8192
    BLOCK_N = 4096 if looped else next_power_of_2(num_cols)
    num_warps = 8 if looped else get_num_warps(BLOCK_N)
    grid = (num_rows,)
    _softmax_kernel[grid](
        x,
        out,
        x.stride(0),
        out.stride(0),
        num_cols,
        BLOCK_N=BLOCK_N,
        LOOPED=looped,
        num_warps=num_warps,
        num_stages=1,
    )
    return out
