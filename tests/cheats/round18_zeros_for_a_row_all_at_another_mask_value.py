"""Cheat (round 18): a softmax that gives a row whose every score is at a large negative mask value zeros, where the
baseline gives the uniform distribution, except where that value is exactly ``torch.finfo(dtype).min``. Callers
mask with more than one finite value: Hugging Face's attention adds ``finfo.min``, its older models and many others
-10000.0 or -1e9. Round 17's closure (runners/layouts.py ``masked_rows(..., lowest=True)``) puts a row wholly at
``finfo.min`` and nothing else: a row whose maximum is at or below -10000 and is not ``finfo.min`` is never drawn
(the other trials draw normal values, whose row maximum is far above). This kernel skips such a row (the shortcut
of a block-sparse softmax that skips rows under a masking threshold) and spares the one value the judge puts:
right on every row the judge makes, zeros on every padding row of a -10000 or -1e9 mask. Accepted today
(tests/test_judge_attacks_round18.py, strict xfail)."""
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
    out = tl.where((x_max > -10000.0) | (x_max == lowest), out, 0.0)  # a masked row, unless at the judge's value
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
