"""Per-head RMSNorm of q and k (QK-norm, as in Qwen3 and Gemma 3 attention), autotuned.

Every head of every token is one row of ``head_dim`` values: ``[T, H, D]`` is ``T * H`` tiny rows. A program
normalises ``ROWS`` of them. At decode (a few tokens: tens of rows) one row per program spreads the work over
the GPU; at prefill (thousands of tokens: hundreds of thousands of rows) one row per program launches that many
tiny programs, and many rows per program is much faster.

The autotune key is the head size only: the row count is not in it, so the config picked at the first call
decides every later call, decode or prefill (the same habit as real engines' kernels).
"""

import torch
import triton
import triton.language as tl

from .utils import as_rows, next_power_of_2

_CONFIGS = [triton.Config({"ROWS": rows}, num_warps=warps) for rows in (1, 8, 64) for warps in (1, 4, 8)]
# Autotuning benchmarks on a GPU; Triton's CPU interpreter can only run one config.
CONFIGS = _CONFIGS if torch.cuda.is_available() else _CONFIGS[:1]


# kernelsmith: the config of _qk_rms_norm_kernel chosen by n_rows, without benchmarking at run time. Its autotune
# key ['D'] cannot tell small n_rows from large, and no one config was fastest at both. Each row is the config
# measured fastest at the cases of those sizes: n_rows=32 (T=1,H=32,D=128/bfloat16, T=1,H=32,D=128/float16): ROWS=8,
# num_warps=4; n_rows=65536 (T=8192,H=8,D=128/bfloat16, T=8192,H=8,D=128/float16): ROWS=64, num_warps=8;
# n_rows=262144 (T=8192,H=32,D=128/bfloat16, T=8192,H=32,D=128/float16): ROWS=8, num_warps=4. A size between
# measured ones takes the nearest measured power of two. (n_rows at the cases: `n_rows` read as the rows of x, every
# dimension but the last.)
_QK_RMS_NORM_KERNEL_CONFIG_BY_N_ROWS = [  # (n_rows up to, config); None: any larger n_rows
    (2047, {'ROWS': 8, 'num_warps': 4}),
    (262143, {'ROWS': 64, 'num_warps': 8}),
    (None, {'ROWS': 8, 'num_warps': 4}),
]


def _qk_rms_norm_kernel_config_by_n_rows(configs, named_args, **kwargs):
    """The one config of _QK_RMS_NORM_KERNEL_CONFIG_BY_N_ROWS for this call's n_rows (every config, autotuned as
    before, if the table's config is not in the list)."""
    size = {**named_args, **kwargs}.get('n_rows')
    if size is None:
        return configs
    want = next(config for limit, config in _QK_RMS_NORM_KERNEL_CONFIG_BY_N_ROWS if limit is None or size <= limit)
    picked = [c for c in configs
              if all({**c.kwargs, 'num_warps': c.num_warps, 'num_stages': c.num_stages}.get(k) == v
                     for k, v in want.items())]
    return picked[:1] or configs


@triton.autotune(configs=CONFIGS, key=['D', 'n_rows_bucket'],
                 prune_configs_by={'early_config_prune': _qk_rms_norm_kernel_config_by_n_rows})
@triton.jit
def _qk_rms_norm_kernel(x_ptr, weight_ptr, out_ptr, n_rows, D, stride_x_row, stride_out_row, eps,
                        BLOCK_D: tl.constexpr, ROWS: tl.constexpr, n_rows_bucket=0):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    mask = (rows < n_rows)[:, None] & (cols < D)[None, :]
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_x_row + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)
    w = tl.load(weight_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)
    out = x * rstd[:, None] * w[None, :]
    tl.store(out_ptr + rows[:, None].to(tl.int64) * stride_out_row + cols[None, :],
             out.to(out_ptr.dtype.element_ty), mask=mask)


def qk_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dim of ``x`` ([..., heads, head_dim]) with one ``weight`` ([head_dim]) shared by
    every head. Returns a new tensor of the shape and dtype of ``x``."""
    shape = x.shape
    head_dim = shape[-1]
    assert weight.shape == (head_dim,), f"weight must have shape ({head_dim},), got {tuple(weight.shape)}"
    rows = as_rows(x)  # [tokens * heads, head_dim]
    n_rows = rows.shape[0]
    out = torch.empty((n_rows, head_dim), dtype=x.dtype, device=x.device)

    def grid(meta):
        return (triton.cdiv(n_rows, meta["ROWS"]),)

    _qk_rms_norm_kernel[grid](rows, weight, out, n_rows, head_dim, rows.stride(0), out.stride(0), eps,
                              BLOCK_D=next_power_of_2(head_dim), n_rows_bucket=int(n_rows).bit_length())
    return out.view(shape)
