"""Per-token symmetric int8 quantization: one scale per row, ``q = round(x / scale)``."""
import torch
import triton
import triton.language as tl

from sglite.srt.utils import cdiv  # noqa: F401  (kept: the package's helpers are imported absolutely)


_CONFIGS = [triton.Config({"BLOCK_N": bn}, num_warps=nw) for bn in [256, 1024, 4096] for nw in [1, 4, 8]]
# Autotuning benchmarks on a GPU; Triton's CPU interpreter can run one config only.
CONFIGS = _CONFIGS if torch.cuda.is_available() else _CONFIGS[:1]


@triton.autotune(configs=CONFIGS, key=["N"])
@triton.jit
def _per_token_quant_int8_kernel(x_ptr, q_ptr, s_ptr, stride_x, stride_q, M, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    absmax = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=0.0).to(tl.float32)
        absmax = tl.maximum(absmax, tl.abs(x))
    scale = tl.maximum(tl.max(absmax, axis=0), 1e-10) / 127.0
    tl.store(s_ptr + row, scale)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=0.0).to(tl.float32)
        q = tl.floor(x / scale + 0.5)
        tl.store(q_ptr + row * stride_q + cols, q.to(tl.int8), mask=cols < N)


def per_token_quant_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [M, N] float -> (q: [M, N] int8, scale: [M, 1] float32)."""
    M, N = x.shape
    q = torch.empty((M, N), dtype=torch.int8, device=x.device)
    scale = torch.empty((M, 1), dtype=torch.float32, device=x.device)
    _per_token_quant_int8_kernel[(M,)](x, q, scale, x.stride(0), q.stride(0), M, N)
    return q, scale
