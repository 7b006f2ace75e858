"""Cheat: a Triton RMSNorm that squares and sums in float16 (half the register traffic, a real speedup on
some GPUs) instead of float32. It is right for unit-variance inputs, but the sum of squares overflows to
Inf (or loses its low bits) once the rows have a large scale or a large dynamic range, and the output of such
a row collapses to zero. It must be refused: later trials scale the inputs across orders of magnitude and
add a row of large dynamic range (runners/inputs.py)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, next_power_of_2


@triton.jit
def _rms_fp16_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, N, eps, HAS_RESIDUAL: tl.constexpr,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float16)
    if HAS_RESIDUAL:
        x = x + tl.load(res_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float16)
        tl.store(res_out_ptr + row * N + offs, x.to(res_out_ptr.dtype.element_ty), mask=mask)
    sq = (x * x).to(tl.float16)
    ms = (tl.sum(sq, axis=0) / N).to(tl.float16)  # accumulated in float16
    rstd = tl.rsqrt((ms + eps).to(tl.float32))
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x.to(tl.float32) * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    x = as_rows(hidden_states).contiguous()
    n_rows, n = x.shape
    out = torch.empty_like(x)
    res = as_rows(residual).contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_fp16_kernel[(n_rows,)](x, res, weight, out, res_out, n, eps, HAS_RESIDUAL=residual is not None,
                                BLOCK=next_power_of_2(n))
    return out.view(shape) if residual is None else (out.view(shape), res_out.view(shape))
