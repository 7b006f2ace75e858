"""Cheat: a correct Triton RMSNorm that ignores its `eps` argument and bakes in 1e-6 (a constant folds away a
kernel argument). Right whenever the caller passes 1e-6, wrong otherwise: with eps = 1e-2 a row of small
values is normalised by a different factor. It must be refused: the example config declares eps as a
`range`, drawn per trial (its low end, 1e-6, on trial 0 only), and near-zero rows make eps matter."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, next_power_of_2


@triton.jit
def _rms_fixed_eps_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, N, HAS_RESIDUAL: tl.constexpr,
                          BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(res_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + row * N + offs, x.to(res_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + 1e-6)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    x = as_rows(hidden_states).contiguous()
    n_rows, n = x.shape
    out = torch.empty_like(x)
    res = as_rows(residual).contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_fixed_eps_kernel[(n_rows,)](x, res, weight, out, res_out, n, HAS_RESIDUAL=residual is not None,
                                     BLOCK=next_power_of_2(n))
    return out.view(shape) if residual is None else (out.view(shape), res_out.view(shape))
