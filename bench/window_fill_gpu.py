"""On CUDA: the window's fill (runners/window_fill.py, one write pass) against torch's ``normal_`` that it replaced,
over a window's worth of input (3 GB a side, as at LayerNorm's M=8192 and M=512 and at decode sizes), and the
kernel's values against the torch form's, bit for bit. Prints a line per case and writes JSON to argv[1].

    python3 bench/window_fill_gpu.py out.json"""
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from runners import window_fill  # noqa: E402

CASES = {"M=8192,N=4096 (47 slots)": (47, 8192 * 4096), "M=512,N=4096 (765 slots)": (765, 512 * 4096),
         "M=1,N=4096 (8192 slots of a padded row)": (8192, 4096 + 64)}


def timed(fn, rounds: int = 15) -> list[float]:
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times


def main() -> None:
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": {}, "checks": {}}
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        small = torch.empty((3, 70_001), dtype=dtype, device="cuda")
        window_fill.fill(small, 12345, 0.37)
        ref = torch.empty((3, 70_001), dtype=dtype)
        window_fill.fill_reference(ref, 12345, 0.37)
        out["checks"][str(dtype)] = torch.equal(small.cpu().view(torch.uint8), ref.view(torch.uint8))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    for name, (slots, row) in CASES.items():
        for dtype in (torch.float16, torch.bfloat16):
            block = torch.empty((slots, row), dtype=dtype, device="cuda")
            new = timed(lambda b=block: window_fill.fill(b, 99, 0.5))
            old = timed(lambda b=block: b.normal_(mean=0.0, std=0.5, generator=gen))
            gb = block.numel() * block.element_size() / 1e9
            row_out = {"gb": round(gb, 3), "new_ms": [round(t, 4) for t in new], "old_ms": [round(t, 4) for t in old]}
            out["cases"][f"{name} {dtype}"] = row_out
            print(f"{name:40s} {str(dtype):15s} {gb:5.2f} GB  fill {statistics.median(new):6.3f} ms "
                  f"(range {max(new) - min(new):.3f}, {gb / statistics.median(new):5.2f} TB/s)  normal_ "
                  f"{statistics.median(old):6.3f} ms (range {max(old) - min(old):.3f})", flush=True)
            del block
            torch.cuda.empty_cache()
    print("checks", out["checks"], "broken", window_fill.BROKEN)
    out["broken"] = window_fill.BROKEN
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
