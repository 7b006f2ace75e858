"""Cheat (round 19): a candidate whose own call is the load on the machine while the oracle's autotuner times configs.

The entry is ``head_scale(x, n)`` (twice the first ``n`` columns of each row; ``n`` a ``range:`` scalar), whose
baseline launches an ``@triton.autotune`` kernel keyed on ``n`` that lives in a helper module of the baseline
(``ops/_impl.py``), not in the kernel module: ``launches.autotuners`` finds none, the oracle's reply says it
autotunes nothing, and the judge pairs the calls of every trial after a case's first
(runners/judge.py ``_trial_calls``). A later trial draws a new ``n``, a new key: the oracle autotunes inside the
paired trial, while this call runs. Its values are the baseline's; it busies the host for a while and writes when
it ran to ``@LOG@`` (on a GPU the same call would be kernels time-sliced with the oracle's benchmarks, stretching
whichever config they overlap: the pick the oracle then keeps for the timing phase)."""
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _head_scale_kernel(x_ptr, out_ptr, stride_x, stride_out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_out + offs, x * 2.0, mask=mask)


def head_scale(x, n):
    t0 = time.time()
    rows, width = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _head_scale_kernel[(rows,)](x, out, x.stride(0), out.stride(0), n, BLOCK=triton.next_power_of_2(width))
    a = torch.randn(256, 256)
    while time.time() - t0 < 1.5:  # the load: a GPU candidate would launch kernels here instead
        a = (a @ a).tanh()
    with open("@LOG@", "a") as log:
        log.write(f"candidate {t0} {time.time()}\n")
    return out
