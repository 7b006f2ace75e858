"""Cheat (round 14): a ReLU whose output is mostly zeros, written as zeros altogether where a row's inputs are small.

The entry is ``relu_dropout(x, keep)`` (tests/test_judge_attacks_round15.py): ``2 relu(x)`` where ``keep`` is 1, else
0 (a ReLU with its dropout mask applied, p = 1/2), bfloat16 (atol 1e-2). About three quarters of an honest output are
zeros (the negative half of ``x``, and half of the rest dropped), so its median magnitude is 0: the judge took each
output's scale at the case's first trial as that median, a scale of 0 made no ratio (runners/compare.py
``scale_ratios``: ``if first and now``), and neither the slots of the window shown in full nor its opened chunks got
the whole-error check that refuses round 8's and round 13's zeros. This kernel stores zeros for every row whose
outputs are all under 9e-3 (0.9 of ``atol``): right at unit scale, all zeros but the wide row at the window's
smallest scales. It must be refused: the scale of an output is that of what it holds (the median of its nonzero
magnitudes, ``output_scales``)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_dropout_kernel(x_ptr, keep_ptr, out_ptr, stride_x, stride_k, stride_o, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    keep = tl.load(keep_ptr + row * stride_k + offs, mask=mask, other=0)
    out = tl.where(keep != 0, tl.maximum(x, 0.0) * 2.0, 0.0)
    out = tl.where(tl.max(tl.abs(out), axis=0) < 0.009, 0.0, out)  # "a row too small to matter"
    tl.store(out_ptr + row * stride_o + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def relu_dropout(x, keep):
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _relu_dropout_kernel[(rows,)](x, keep, out, x.stride(0), keep.stride(0), out.stride(0), n,
                                  BLOCK=triton.next_power_of_2(n))
    return out
