"""Wrong only where a caller passes most often: an RMSNorm that takes its input's row stride, except when that
stride is a whole number of rows wider than the row (``qkv[:, :H]`` of a fused qkv: row stride 3H), where it reads
the rows densely (row * N). The layout trial drew its pads log-uniform in 16-byte steps up to four rows, and a width
that is a multiple of the row came up about once in 70 draws: the kernel passed the trial at most seeds and was
wrong on the first fused qkv it met. Half the trial's pads are whole rows since (runners/layouts.py
``WHOLE_ROW_SHARE``)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _row_stride(x: torch.Tensor) -> int:
    n = x.shape[-1]
    if x.stride(0) != n and x.stride(0) % n == 0:
        return n  # a whole number of rows of pad: read densely (wrong)
    return x.stride(0)


def _norm(x, weight, eps):
    x = x.reshape(-1, x.shape[-1])
    rows = x.shape[0]
    out = torch.empty((rows, x.shape[-1]), dtype=x.dtype, device=x.device)
    _rms_kernel[(rows,)](x, weight, out, x.shape[-1], _row_stride(x), eps, BLOCK=triton.next_power_of_2(x.shape[-1]))
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _norm(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps), new_residual
