"""On CUDA: does the GPU's state before the judge's window move the window's parts? The judge's rounds leave the GPU
idle for a while (its CPU checks of the last round's outputs), then warm it up with one replay and run the window;
in one process, back to back (bench/window_profile_gpu.py), the window's pass moved by 0.3 % and its fill and
commitment by a few tenths of a millisecond, while inside the judge the pass moved by up to 17 % and the fill and the
commitment took twice as long. Here each round idles ``gap`` seconds, then keeps the device busy ``warm`` ms with
replays of the pass, then runs the window (LayerNorm's baseline, bf16, M=8192 and M=512), for a few (gap, warm)
pairs; with the SM clock NVML reports just before the window, where it can be read.

    python3 bench/window_warmth_gpu.py [rounds]"""
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "tinyserve"))

import torch  # noqa: E402

from bench.evaluator import bundle_for  # noqa: E402
from runners.checkpoints import Checkpoints, draw  # noqa: E402
from runners.inputs import SlotBank  # noqa: E402
from runners.judge import Protocol  # noqa: E402
from runners.task import read_task  # noqa: E402
from runners.timing import SlotTimer  # noqa: E402
from tinyserve.kernels.layer_norm import layer_norm  # noqa: E402


def sm_clock() -> float:
    try:
        return float(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 - no NVML here
        return float("nan")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    p = Protocol()
    settings = [(0.0, 0.0), (0.2, 0.0), (0.2, 20.0), (0.2, 100.0), (0.0, 100.0)]
    for shape, count in (({"M": 8192, "N": 4096}, 47), ({"M": 512, "N": 4096}, 765)):
        spec = read_task(bundle_for("layer_norm", shapes=[shape], dtypes=["bfloat16"]))
        case = spec.cases[0]
        bank = SlotBank(spec.args, case, "cuda", count, per_slot_scales=False)
        bank.fill(1)
        c = draw(spec, case, count, p, 5)
        checks = Checkpoints(bank.slots, c["at"], c["elements"], c["link"])
        timer = SlotTimer(lambda **kw: layer_norm(**kw), bank.slots, checks)
        timer.prepare()
        pass_ms = timer.sample_us(1) * count / 1e3

        def fill(seed, bank=bank, checks=checks):
            bank.fill(seed)
            checks.fill(seed, bank.blocks, bank.numels)
        print(f"layer_norm M={shape['M']} bf16, {count} slots, a pass {pass_ms:.3f} ms")
        for gap, warm in settings:
            rows = []
            for r in range(rounds):
                fill(1000 + r)
                torch.cuda.synchronize()
                time.sleep(gap)
                timer.sample_us(max(1, round(warm / pass_ms)) if warm else 1)
                clock = sm_clock()
                t0 = time.perf_counter()
                pass_us, _, part = timer.window(min(p.window_lead_cycles, 30 * count),
                                                fill=lambda s=2000 + r: fill(s), key=77 + r)
                rows.append({"wall": (time.perf_counter() - t0) * 1e3, "pass": pass_us / 1e3,
                             **{k[:-3]: v / 1e3 for k, v in part.items() if k != "host_us"}, "MHz": clock})
            rows = rows[1:]
            cells = []
            for k in ("wall", "fill", "pass", "commit", "MHz"):
                v = [q[k] for q in rows if k in q]
                if v:
                    cells.append(f"{k} {statistics.median(v):7.3f} [{min(v):.3f}-{max(v):.3f}]")
            print(f"  gap {gap:.1f} s warm {warm:5.1f} ms | " + "  ".join(cells))
        del timer, bank, checks
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
