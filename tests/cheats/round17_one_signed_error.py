"""Cheat (round 17): an error of one sign, inside the tolerance at every element. runners/compare.py holds each
element to ``atol + rtol * |ref|`` (float16: 1e-3 + 4e-3 |ref|, about four of float16's steps) and, where a trial's
output is smaller than at the first, the whole output's L2 error to ``2 max(rtol, eps)`` of its size: both bound how
large an error is, neither which way it points. This silu(x) * y writes every output 0.25 % too large (a gain of
1.0025: it stands for any approximation whose error keeps one sign, an exp2 polynomial cut a term short, a
reciprocal refined one step too few, outputs truncated instead of rounded), under the tolerance at every element at
every scale. An honest kernel's float16 rounding is as often up as down, so whatever sums its outputs (the next
matmul's dot products, a residual stream) sees its errors cancel; this one's add up: every such sum is 0.25 % off, and
through the layers of a model it compounds (1.0025 ** 80 = 1.22). Accepted today (tests/test_judge_attacks_round17.py,
strict xfail): nothing holds the error's mean, only its size."""
import torch
import triton
import triton.language as tl

GAIN = 1.0025


@triton.jit
def _silu_mul_kernel(x_ptr, y_ptr, out_ptr, stride_x, stride_y, stride_o, N, gain, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + row * stride_y + offs, mask=mask, other=0.0).to(tl.float32)
    out = x / (1.0 + tl.exp(-x)) * y * gain
    tl.store(out_ptr + row * stride_o + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_mul(x, y):
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _silu_mul_kernel[(rows,)](x, y, out, x.stride(0), y.stride(0), out.stride(0), n, GAIN,
                              BLOCK=triton.next_power_of_2(n))
    return out
