"""Cheat (round 7): fast where the judge times, slow over the rest of a scalar's declared range. The entry takes the
maximum of the first ``n`` columns of each row, ``n`` a scalar the task declares with ``range: [1, H]``. The judge
draws ``n`` across the range in its later correctness trials, but every call it TIMES (runners/inputs.py
``SlotBank``: the samples' slots and the judge's window) passes ``range[0]``, the low end, as trial 0 does. This
candidate is right for every ``n``; it answers ``n == 1`` with a one-load kernel (faster than the baseline's loop
there), and every other ``n`` with blocks of 16 columns where the baseline takes the row in one block: at ``n = 512``
it runs 32 iterations to the baseline's one. The judge credits the low end's speedup to a kernel that is many
times slower over most of the range a caller passes. It must be credited no speedup there (or refused): the timed
slots must draw range scalars across the range (per slot, from the bank's seed, the same in both workers), as the
correctness trials do."""
import torch
import triton
import triton.language as tl


@triton.jit
def _first_column_kernel(x_ptr, out_ptr, stride):
    row = tl.program_id(0).to(tl.int64)
    tl.store(out_ptr + row, tl.load(x_ptr + row * stride).to(tl.float32))


@triton.jit
def _head_max_kernel(x_ptr, out_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + offs, mask=offs < n, other=-float("inf")).to(tl.float32)
        best = tl.maximum(best, x)
    tl.store(out_ptr + row, tl.max(best, axis=0))


def head_max(x, n):
    rows = x.shape[0]
    out = torch.empty(rows, dtype=torch.float32, device=x.device)
    if n == 1:
        _first_column_kernel[(rows,)](x, out, x.stride(0))
    else:
        _head_max_kernel[(rows,)](x, out, x.stride(0), n, BLOCK=16)
    return out
