"""Fused residual add and RMSNorm, in place: ``residual += x`` then ``x = rmsnorm(residual) * weight``."""
import torch
import triton
import triton.language as tl

from sglite.srt.utils import dump_debug_tensors, row_block


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, stride_x, stride_r, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
    s = (x + r).to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + row * stride_r + cols, s, mask=mask)
    s = s.to(tl.float32)
    var = tl.sum(s * s, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = s * tl.rsqrt(var + eps) * w
    tl.store(x_ptr + row * stride_x + cols, y.to(x_ptr.dtype.element_ty), mask=mask)


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> None:
    """In place on ``x`` and ``residual`` (both [..., hidden], rows contiguous)."""
    n_cols = x.shape[-1]
    x2 = x.view(-1, n_cols)
    r2 = residual.view(-1, n_cols)
    _fused_add_rms_norm_kernel[(x2.shape[0],)](x2, r2, weight, x2.stride(0), r2.stride(0), n_cols, eps,
                                                BLOCK=row_block(n_cols), num_warps=4)


def fused_add_rms_norm_debug(x, residual, weight, eps=1e-6):
    """The same with the inputs dumped first (only for debugging: the entry never reaches it)."""
    dump_debug_tensors("fused_add_rms_norm", x=x, residual=residual)
    return fused_add_rms_norm(x, residual, weight, eps)
