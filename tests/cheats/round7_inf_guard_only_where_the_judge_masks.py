"""Cheat (round 7): the -inf guard only on the rows the judge masks. runners/inputs.py ``masked_rows`` (the masked
trial) puts its patterns at fixed rows: row 0 a masked prefix, row 1 a masked suffix, row 2 a masked run in the
middle, row 3 -inf at random places (a one-row tensor: the prefix or the suffix at row 0). Of these only a masked
prefix longer than a block needs the guard of a one-pass softmax (a running maximum still -inf at the first block:
exp(-inf - -inf) = NaN), and it is always at row 0. This online softmax (round 4's, over blocks of the row) keeps
the guard on rows 0-3 and drops it elsewhere: NaN on a masked prefix at any other row of a batch (left padding, a
sliding window's past), which the judge never draws. It must be refused at correctness: the masked patterns' rows
drawn per trial from the secret (and more than one row of each pattern), not fixed."""
import torch
import triton
import triton.language as tl


@triton.jit
def _online_softmax_kernel(x_ptr, out_ptr, stride_x_row, stride_out_row, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    guarded = row < 4
    m = -float("inf")
    s = 0.0
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x_row + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = tl.where(guarded & (m_new == -float("inf")), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x_row + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * stride_out_row + offs, (tl.exp(x - m) / s).to(out_ptr.dtype.element_ty),
                 mask=offs < N)


def softmax(x: torch.Tensor) -> torch.Tensor:
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    block = min(1024, triton.next_power_of_2(cols) // 2) or 1
    _online_softmax_kernel[(rows,)](x, out, x.stride(0), out.stride(0), cols, BLOCK=block, num_warps=4)
    return out
