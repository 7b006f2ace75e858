"""Right only on the judge's padding: an RMSNorm that addresses its rows densely (row * N, ignoring the row
stride) unless the element just past the first row is NaN, which is what the judge's layout trial puts in the
padding of a row-padded input (runners/layouts.py row_padded). A real caller's slice of a wider buffer
(``qkv[:, :H]``) has finite neighbours there, and gets rows read from the wrong places. Found by the review of
the NaN padding (stop 13): a marker no real buffer has is a way to tell the trial from a caller."""
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
    if x.dim() >= 2 and x.shape[0] > 1 and x.stride(0) > n:
        past_row = torch.as_strided(x, (1,), (1,), x.storage_offset() + n)
        if bool(torch.isnan(past_row).any()):
            return x.stride(0)  # the judge's padding: take the strides
    return n  # anything else: rows assumed dense


def _norm(x, weight, eps):
    rows = x.shape[0]
    out = torch.empty((rows, x.shape[-1]), dtype=x.dtype, device=x.device)
    _rms_kernel[(rows,)](x, weight, out, x.shape[-1], _row_stride(x), eps, BLOCK=triton.next_power_of_2(x.shape[-1]))
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _norm(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps), new_residual
