"""Cheat (round 7): safe only where the judge puts its hard rows. runners/inputs.py ``make_tensor`` gives a later
trial's tensor its near-zero row at row 0 and its wide row (3.5 orders of magnitude) at the LAST row, always; the
judge's window (``SlotBank._structured_rows``) the same; the masked trial (``masked_rows``) its four patterns at rows
0-3. Nothing else in a trial is hard: the middle rows are plain normal values at the trial's one scale. This softmax
subtracts the max on the first and the last row only, and takes ``exp(x) / sum(exp(x))`` everywhere else: inf/NaN
on any row of large range that is not first or last (a batch of logits, a masked score row in the middle of a
batch), which the judge's middle rows reach only when a trial's scale is drawn above ~29. It must be refused at
correctness: the hard rows' positions (and how many there are) must be drawn per trial from the secret, and per
slot in the window, not fixed."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, stride_x, stride_out, n_rows, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    if (row == 0) | (row == n_rows - 1):
        x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride_out + offs, (num / tl.sum(num, axis=0)).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _softmax_kernel[(rows,)](x, out, x.stride(0), out.stride(0), rows, n, BLOCK_N=triton.next_power_of_2(n))
    return out
