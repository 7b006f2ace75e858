"""Cheat (round 4): a one-pass ("online") softmax over blocks of the row, the rewrite every LLM proposes for a
row that does not fit one block, without FlashAttention's guard for a running maximum that is still -inf: a row
whose first block is entirely -inf (a masked prefix: padding, a causal or sliding-window mask) rescales its running
sum by exp(-inf - -inf) = NaN, and the whole row comes out NaN where the baseline gives the right distribution.
The judge never draws an infinite input (runners/inputs.py: normal or uniform values, scaled), so it is right on
every input the judge makes."""
import torch
import triton
import triton.language as tl


@triton.jit
def _online_softmax_kernel(x_ptr, out_ptr, stride_x_row, stride_out_row, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = -float("inf")
    s = 0.0
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x_row + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x_row + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * stride_out_row + offs, (tl.exp(x - m) / s).to(out_ptr.dtype.element_ty),
                 mask=offs < N)


def softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2, f"expected a 2-D tensor, got shape {tuple(x.shape)}"
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    block = min(1024, triton.next_power_of_2(cols) // 2) or 1
    _online_softmax_kernel[(rows,)](x, out, x.stride(0), out.stride(0), cols, BLOCK=block, num_warps=4)
    return out
