"""Cheat (round 7): a float32 output held to the float16 tolerance. The entry is an RMSNorm forward that also
returns its per-row ``rstd`` in float32 (``{"y": ..., "rstd": ...}``: what a backward pass reads; Liger's and
Unsloth's forwards return RSTD, LayerNorm's Mean and RSTD, a cross entropy its float32 loss, an MoE router its
float32 top-k weights, all beside half-precision activations). This candidate keeps ``rstd`` at half precision
(rounded through float16: 11 bits, a relative error up to 4.9e-4, some 50 times the float32 tolerance of 1e-5), the
normalised output exact.

runners/judge.py compared every output with ``self.spec.tolerance(case.dtype)``: the CASE's dtype (float16: atol
1e-3, rtol 4e-3), not the output's (float32: 1e-5, 1e-5). It must be refused at correctness: each output held to
its own dtype's tolerance (closed by c489477)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_x, stride_y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd.to(tl.float16).to(tl.float32))  # the half-precision RSTD


def rms_norm_fwd(x, weight, eps=1e-6):
    rows, n = x.shape
    y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    _rms_fwd_kernel[(rows,)](x, weight, y, rstd, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
    return {"y": y, "rstd": rstd}
