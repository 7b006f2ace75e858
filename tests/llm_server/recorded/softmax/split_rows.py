"""Row softmax over the last dim."""

import torch
import triton
import triton.language as tl

from .utils import get_num_warps, next_power_of_2


@triton.jit
def _softmax_rows_kernel(
    x_ptr,
    out_ptr,
    stride_x_row,
    stride_out_row,
    M,
    N,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """ROWS rows per program, each held whole in registers: one read, one write."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    rows64 = rows.to(tl.int64)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    x = tl.load(x_ptr + rows64[:, None] * stride_x_row + cols[None, :], mask=mask,
                other=-float("inf")).to(tl.float32)
    x_max = tl.max(x, axis=1)
    num = tl.exp(x - x_max[:, None])
    den = tl.sum(num, axis=1)
    out = num / den[:, None]
    tl.store(out_ptr + rows64[:, None] * stride_out_row + cols[None, :], out.to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _softmax_partials_kernel(x_ptr, pmax_ptr, psum_ptr, stride_x_row, N, SPLITS, BLOCK: tl.constexpr):
    """Pass 1 of a long row split over SPLITS programs: the chunk's max and sum of exp(x - max)."""
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x_row + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    s = tl.sum(tl.exp(x - tl.where(m == -float("inf"), 0.0, m)), axis=0)  # a fully masked chunk adds 0, not NaN
    tl.store(pmax_ptr + row * SPLITS + chunk, m)
    tl.store(psum_ptr + row * SPLITS + chunk, s)


@triton.jit
def _softmax_normalize_kernel(x_ptr, out_ptr, pmax_ptr, psum_ptr, stride_x_row, stride_out_row, N, SPLITS,
                              BLOCK: tl.constexpr, SPLITS_P2: tl.constexpr):
    """Pass 2: combine the row's partials, then normalise this program's chunk."""
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    p = tl.arange(0, SPLITS_P2)
    maxes = tl.load(pmax_ptr + row * SPLITS + p, mask=p < SPLITS, other=-float("inf"))
    sums = tl.load(psum_ptr + row * SPLITS + p, mask=p < SPLITS, other=0.0)
    g = tl.max(maxes, axis=0)
    den = tl.sum(sums * tl.exp(maxes - g), axis=0)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=0.0).to(tl.float32)
    out = tl.exp(x - g) / den
    tl.store(out_ptr + row * stride_out_row + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a 2-D ``[M, N]`` tensor (fp32 math, output in ``x.dtype``)."""
    assert x.dim() == 2, f"expected a 2-D tensor, got shape {tuple(x.shape)}"
    if x.stride(-1) != 1:
        x = x.contiguous()
    num_rows, num_cols = x.shape
    out = torch.empty((num_rows, num_cols), dtype=x.dtype, device=x.device)

    if num_cols > 8192:
        # Long rows: split each row over many programs so every SM has work, two light passes.
        block = 2048
        splits = triton.cdiv(num_cols, block)
        pmax = torch.empty((num_rows, splits), dtype=torch.float32, device=x.device)
        psum = torch.empty((num_rows, splits), dtype=torch.float32, device=x.device)
        grid = (num_rows, splits)
        _softmax_partials_kernel[grid](x, pmax, psum, x.stride(0), num_cols, splits, BLOCK=block, num_warps=4)
        _softmax_normalize_kernel[grid](x, out, pmax, psum, x.stride(0), out.stride(0), num_cols, splits,
                                        BLOCK=block, SPLITS_P2=next_power_of_2(splits), num_warps=4)
        return out

    BLOCK_N = next_power_of_2(num_cols)
    rows = max(1, min(16, 8192 // BLOCK_N))
    num_warps = get_num_warps(BLOCK_N * rows)
    _softmax_rows_kernel[(triton.cdiv(num_rows, rows),)](
        x, out, x.stride(0), out.stride(0), num_rows, num_cols, ROWS=rows, BLOCK_N=BLOCK_N,
        num_warps=num_warps, num_stages=1,
    )
    return out
