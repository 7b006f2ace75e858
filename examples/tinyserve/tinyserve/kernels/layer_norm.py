"""LayerNorm over the last dim, autotuned.

The autotune key is the hidden size only: the token count (rows) is not in it, so the config picked at the
first call decides every later call, whatever its number of tokens (the same habit as real engines' kernels).
"""

import torch
import triton
import triton.language as tl

from .utils import as_rows, next_power_of_2

_CONFIGS = [triton.Config({"ROWS": rows}, num_warps=warps) for rows in (1, 4, 16) for warps in (2, 4, 8)]
# Autotuning benchmarks on a GPU; Triton's CPU interpreter can only run one config.
CONFIGS = _CONFIGS if torch.cuda.is_available() else _CONFIGS[:1]


@triton.autotune(configs=CONFIGS, key=["N"])
@triton.jit
def _layer_norm_kernel(x_ptr, weight_ptr, bias_ptr, out_ptr, M, N, stride_x_row, stride_out_row, eps,
                       BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < M
    mask = row_mask[:, None] & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_x_row + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    mean = tl.sum(x, axis=1) / N
    diff = tl.where(mask, x - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(diff * diff, axis=1) / N + eps)
    w = tl.load(weight_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    b = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    out = diff * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(out_ptr + rows[:, None].to(tl.int64) * stride_out_row + cols[None, :],
             out.to(out_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5):
    shape = x.shape
    hidden = shape[-1]
    assert weight.shape == (hidden,) and bias.shape == (hidden,)
    rows = as_rows(x)
    num_rows = rows.shape[0]
    out = torch.empty((num_rows, hidden), dtype=x.dtype, device=x.device)

    def grid(meta):
        return (triton.cdiv(num_rows, meta["ROWS"]),)

    _layer_norm_kernel[grid](rows, weight, bias, out, num_rows, hidden, rows.stride(0), out.stride(0), eps,
                             BLOCK_N=next_power_of_2(hidden))
    return out.view(shape)
