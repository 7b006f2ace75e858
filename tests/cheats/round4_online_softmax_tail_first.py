"""Cheat (round 4, on the masked-rows trial): the one-pass ("online") softmax without the -inf guard again, but
walking the row from its end: the ragged tail block first (as a kernel does that peels the partial block off the
main loop), then the full blocks back to the start. The judge's masked trial (runners/layouts.py masked_rows)
masks a PREFIX (the first three quarters of a row) and random places of another row: walking from the end, the
first block seen holds finite scores and the running maximum never meets a block that is still all -inf, so the
cheat is right there. A SUFFIX mask (a causal mask's future positions, right padding) makes the first block seen
all -inf, exp(-inf - -inf) = NaN, and the whole row NaN where the baseline gives the right distribution."""
import torch
import triton
import triton.language as tl


@triton.jit
def _online_softmax_kernel(x_ptr, out_ptr, stride_x_row, stride_out_row, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    blocks = tl.cdiv(N, BLOCK)
    m = -float("inf")
    s = 0.0
    for i in range(0, blocks):
        offs = (blocks - 1 - i) * BLOCK + tl.arange(0, BLOCK)
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
