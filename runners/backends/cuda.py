"""Triton on NVIDIA GPUs (CUDA). Verified on an H200 (bench/results/evaluator-h200/)."""
from .base import Backend

CUDA = Backend(
    name="triton",
    device="cuda",
    timed=True,
    warp_size=32,
    visible_devices=("CUDA_VISIBLE_DEVICES",),
    env_drop=("TRITON_INTERPRET",),
)
