"""Every config of the example's autotuned QK-norm, pinned, timed at decode and prefill on one GPU, and the config
its autotuner picks at a first call at decode in fresh processes: is the first-call pick a matter of noise?
    python3 bench/qk_norm_configs_gpu.py > qk-configs.json"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "tinyserve"))

CASES = [(1, 32), (8192, 32)]
DTYPES = ["float16", "bfloat16"]


def first_pick(dtype: str) -> str:
    """In a fresh process: the config the autotuner keeps after one call at decode (T=1, 32 heads)."""
    code = ("import torch\nfrom tinyserve.kernels import qk_norm as m\n"
            f"x = torch.randn(1, 32, 128, device='cuda', dtype=torch.{dtype}); w = torch.randn(128, device='cuda', "
            f"dtype=torch.{dtype})\nm.qk_rms_norm(x, w)\nprint([str(c) for c in m._qk_rms_norm_kernel.cache.values()][0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "examples" / "tinyserve")})
    return (out.stdout or out.stderr).strip().splitlines()[-1]


def main() -> None:
    import torch
    import triton.testing

    from tinyserve.kernels import qk_norm as m

    tuner = m._qk_rms_norm_kernel
    configs = list(tuner.configs)
    table = {}
    for dtype in DTYPES:
        for t, h in CASES:
            x = torch.randn(t, h, 128, device="cuda", dtype=getattr(torch, dtype))
            w = torch.randn(128, device="cuda", dtype=getattr(torch, dtype))
            row = {}
            for config in configs:
                tuner.configs = [config]
                tuner.cache.clear()
                m.qk_rms_norm(x, w)
                row[str(config)] = round(triton.testing.do_bench_cudagraph(lambda: m.qk_rms_norm(x, w), rep=50) * 1e3, 2)
            table[f"T={t},H={h},D=128/{dtype}"] = row
            print(f"T={t},H={h}/{dtype}: " + ", ".join(f"{k.split(',')[0]}/{k.split('num_warps: ')[1].split(',')[0]}w "
                                                   f"{v}us" for k, v in row.items()), file=sys.stderr, flush=True)
    picks = {dtype: [first_pick(dtype) for _ in range(4)] for dtype in DTYPES}
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "triton": triton.__version__, "us_per_config": table, "first_pick_at_decode": picks}, indent=1))


if __name__ == "__main__":
    main()
