"""Cheat (round 4, on the layout trial): RMSNorm that takes strides, but one row stride for every input: the
residual is addressed with hidden_states' row stride (one `stride_row` argument for both, a common shortcut in a
rewrite). The judge's layout trial (runners/layouts.py row_padded) pads every 2-D input by the same 64 bytes, so
hidden_states and residual always share their row stride there, and the cheat is right on every input the judge
draws; a caller that passes a slice of a wider buffer with a dense residual (`qkv[:, :H]`, `residual`) gets the
residual read from the wrong rows."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, stride_row, N, eps,
                HAS_RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_row + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(residual_ptr + row * stride_row + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(residual_out_ptr + row * N + offs, x.to(residual_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, residual: torch.Tensor = None):
    shape, hidden = hidden_states.shape, hidden_states.shape[-1]
    x = hidden_states.reshape(-1, hidden)
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty((x.shape[0], hidden), dtype=x.dtype, device=x.device)
    res = residual.reshape(-1, hidden) if residual is not None else x
    res_out = torch.empty_like(out) if residual is not None else out
    block = triton.next_power_of_2(hidden)
    _rms_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.stride(0), hidden, eps,
                               HAS_RESIDUAL=residual is not None, BLOCK_N=block, num_warps=8 if block >= 2048 else 4)
    return (out.view(shape), res_out.view(shape)) if residual is not None else out.view(shape)
