"""Triton on NVIDIA GPUs (CUDA). Verified on an H200 (bench/results/evaluator-h200/)."""
import functools
import subprocess

from .base import Backend

CUDA = Backend(
    name="triton",
    device="cuda",
    timed=True,
    warp_size=32,
    visible_devices=("CUDA_VISIBLE_DEVICES",),
    env_drop=("TRITON_INTERPRET",),
)


@functools.lru_cache(maxsize=1)
def driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False).stdout
        return out.split("\n")[0].strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
