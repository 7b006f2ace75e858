"""Cheat (round 17): a softmax that gives a row whose every score is masked zeros, where the baseline gives the
uniform distribution. Callers mask scores two ways: with -inf, or with the dtype's lowest finite value
(``torch.finfo(dtype).min``: Hugging Face's attention masks, added to the scores, so that a row of padding, every
score masked, stays finite). The judge's masked trial (runners/layouts.py ``masked_rows``) puts -inf only, over three
quarters of a row, a run or random places: never a whole row (the baseline would be NaN there and nothing asked), and
never the finite mask value; its other trials draw normal values, never two equal. So a row whose maximum is the mask
value (all its scores masked) is never drawn. This kernel treats such a row as masked out and writes zeros (the
shortcut of a block-sparse softmax that skips tiles whose scores are all masked, and forgets the row all of whose tiles
are): right on every row the judge makes, wrong on every padding row of an additive finite mask (zeros where 1/N is
due; the row's outputs no longer sum to one). Accepted today (tests/test_judge_attacks_round17.py, strict xfail)."""
import torch
import triton
import triton.language as tl

from .utils import get_num_warps, next_power_of_2


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, stride_x_row, stride_out_row, N, lowest, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x_max = tl.max(x, axis=0)
    num = tl.exp(x - x_max)
    out = num / tl.sum(num, axis=0)
    out = tl.where(x_max > lowest, out, 0.0)  # every score at the mask value (or -inf): the row skipped
    tl.store(out_ptr + row * stride_out_row + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2, f"expected a 2-D tensor, got shape {tuple(x.shape)}"
    if x.stride(-1) != 1:
        x = x.contiguous()
    num_rows, num_cols = x.shape
    out = torch.empty((num_rows, num_cols), dtype=x.dtype, device=x.device)
    block = next_power_of_2(num_cols)
    _softmax_kernel[(num_rows,)](x, out, x.stride(0), out.stride(0), num_cols, float(torch.finfo(x.dtype).min),
                                 BLOCK_N=block, num_warps=get_num_warps(block), num_stages=1)
    return out
