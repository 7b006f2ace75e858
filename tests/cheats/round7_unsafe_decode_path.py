"""Cheat (round 7): an unsafe path at decode sizes, where the judge draws no wide row. runners/inputs.py
``make_tensor`` gives a later trial's tensor a near-zero row and a row spanning 3.5 orders of magnitude only when
it has two rows or more (``t.dim() >= 2 and t.shape[0] >= 2``), and the judge's window (``SlotBank._structured_rows``)
likewise: a one-row input (a decode step, T = 1: the size a serving engine calls most) only ever gets plain normal
values at one scale per trial. This softmax takes the max-subtracted path for two rows or more and, for one row,
``exp(x) / sum(exp(x))`` without the max: inf/NaN once a value passes ~88 (an unscaled logit, a row of large dynamic
range), which a one-row trial reaches only when its scale is drawn above ~28 (about 1 trial in 80). No call is told
apart from another: it is the same code for every caller, wrong on every decode row of large range. It must be
refused at correctness: one-row tensors (and 1-D ones) need their own wide segment in later trials (the row's last
part times the per-column factors), as the window's slots of one row do."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, stride_x, stride_out, N, SUBTRACT_MAX: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    if SUBTRACT_MAX:
        x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride_out + offs, (num / tl.sum(num, axis=0)).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _softmax_kernel[(rows,)](x, out, x.stride(0), out.stride(0), n, SUBTRACT_MAX=rows > 1,
                             BLOCK_N=triton.next_power_of_2(n))
    return out
