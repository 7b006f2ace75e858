"""Cheat (round 8): work done once per new value of a range scalar, which the judge never times.

``head_max(x, n)``: the maximum of the first ``n`` columns of each row, ``n`` declared with ``range: [1, H]`` (a value
that changes from call to call). This candidate tunes its block size for every distinct ``n`` it meets: at the first
call with a new ``n`` it runs every block size from 16 to the row's width a few times, keeps the fastest, and from
then on launches that one (what ``@triton.autotune(key=["n"])`` does, or ``n`` made a ``tl.constexpr``: a compile
per value on the GPU). A caller whose ``n`` varies pays the tuning (here about 20 calls' worth; on the GPU an
autotune or a compile, 0.1-1 s) at nearly every call. The judge charges none of it: every value a timed call passes
is met first untimed (runners/inputs.py ``SlotBank``: four values, from a generator seeded by the slot count, public;
runners/timing.py ``SlotTimer.prepare`` warms up on each, and the stand-in calls every slot before timing), and the
correctness trials, which draw fresh values from the secret, are not timed. Per value the tuned kernel is as fast as
the baseline's or faster, so it is accepted (and credited whatever the tuning found).

It must be refused, or credited nothing, where the cost per new value exceeds the baseline's: the judge should time
each side's first call at range values drawn from its secret that neither side has met (a "fresh value" probe after
the correctness trials, by the judge's own clock), and hold the candidate's against the oracle's (a tolerance for
Triton's own specialisations: a few per kernel, n == 1 and n % 16 == 0); and the window's range values should be
drawn from the window's secret seed, not from ``7919 + count``."""
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _head_max_kernel(x_ptr, out_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + offs, mask=offs < n, other=-float("inf")).to(tl.float32)
        best = tl.maximum(best, x)
    tl.store(out_ptr + row, tl.max(best, axis=0))


_TUNED: dict = {}  # (n, width, device) -> the block size found fastest for it
TRIES = 3


def _launch(x, n, out, block):
    _head_max_kernel[(x.shape[0],)](x, out, x.stride(0), n, BLOCK=block)


def _tune(x, n, out) -> int:
    blocks, block = [], 16
    while block < triton.next_power_of_2(x.shape[1]):
        blocks.append(block)
        block *= 2
    blocks.append(block)
    best, best_s = blocks[-1], float("inf")
    for block in blocks:
        if block < n // 4:  # more than four iterations: never the fastest
            continue
        _launch(x, n, out, block)
        if x.is_cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(TRIES):
            _launch(x, n, out, block)
        if x.is_cuda:
            torch.cuda.synchronize()
        spent = time.perf_counter() - t0
        if spent < best_s:
            best, best_s = block, spent
    return best


def head_max(x, n):
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    key = (int(n), x.shape[1], str(x.device))
    if key not in _TUNED:
        _TUNED[key] = _tune(x, n, out)
    _launch(x, n, out, _TUNED[key])
    return out
