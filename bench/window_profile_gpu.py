"""On CUDA: the judge's window as a worker runs it (runners/timing.py ``SlotTimer.window``: lead, fill, pass,
commitment), on LayerNorm's baseline at M=8192, 512 and 1 and softmax's at M=1, round after round, with each part's
device time and the host time of each step of the fill (the window's float fill, the structured rows, the
checkpoints' fill) and of the commitment: where a window's time goes, and what moves from one round to the next.

    python3 bench/window_profile_gpu.py [rounds]"""
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "tinyserve"))

import torch  # noqa: E402

from bench.evaluator import bundle_for  # noqa: E402
from runners import inputs, window_fill  # noqa: E402
from runners.checkpoints import Checkpoints, draw  # noqa: E402
from runners.inputs import SlotBank  # noqa: E402
from runners.judge import Protocol  # noqa: E402
from runners.task import read_task  # noqa: E402
from runners.timing import SlotTimer  # noqa: E402
from tinyserve.kernels.layer_norm import layer_norm  # noqa: E402
from tinyserve.kernels.softmax import softmax  # noqa: E402

HOST: dict = {}


def timed_host(name, fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            HOST.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
    return wrapper


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    window_fill.fill = timed_host("window_fill.fill", window_fill.fill)
    SlotBank._structured_rows = timed_host("structured rows", SlotBank._structured_rows)
    Checkpoints.fill = timed_host("checkpoints' fill", Checkpoints.fill)
    SlotTimer.commit = timed_host("commit (host, to the digest)", SlotTimer.commit)
    p = Protocol()
    for kernel, fn, shape, count in (("layer_norm", layer_norm, {"M": 8192, "N": 4096}, 47),
                                     ("layer_norm", layer_norm, {"M": 512, "N": 4096}, 765),
                                     ("layer_norm", layer_norm, {"M": 1, "N": 4096}, 8192),
                                     ("softmax", softmax, {"M": 1, "N": 32000}, 8192)):
        spec = read_task(bundle_for(kernel, shapes=[shape], dtypes=["bfloat16"]))
        case = spec.cases[0]
        bank = SlotBank(spec.args, case, "cuda", count, per_slot_scales=False)
        bank.fill(1)
        c = draw(spec, case, count, p, 5)
        checks = Checkpoints(bank.slots, c["at"], c["elements"], c["link"])
        timer = SlotTimer(lambda fn=fn, **kw: fn(**kw), bank.slots, checks)
        timer.prepare()

        def fill(seed, timer=timer, bank=bank, checks=checks):
            bank.fill(seed)
            checks.fill(seed, bank.blocks, bank.numels)
        parts = []
        HOST.clear()
        for r in range(rounds):
            fill(1000 + r)
            torch.cuda.synchronize()
            timer.sample_us(1)
            segments = torch.cuda.memory_stats().get("segment.all.allocated", 0)  # cudaMalloc calls so far
            t0 = time.perf_counter()
            pass_us, _, part = timer.window(min(p.window_lead_cycles, 30 * count), fill=lambda s=2000 + r: fill(s),
                                            key=77 + r)
            wall = (time.perf_counter() - t0) * 1e3
            parts.append({"wall": wall, "pass": pass_us / 1e3, **{k[:-3]: v / 1e3 for k, v in part.items()},
                          "mallocs": torch.cuda.memory_stats().get("segment.all.allocated", 0) - segments})
        print(f"{kernel} M={shape['M']} slots {count}, checkpoints {len(checks.at)}")
        for k in ("wall", "host", "lead", "fill", "pass", "commit", "mallocs"):
            v = [q[k] for q in parts[1:]]
            print(f"  {k:8s} median {statistics.median(v):7.3f} ms  range {min(v):7.3f}-{max(v):7.3f}")
        for k, v in HOST.items():
            v = v[2:]
            print(f"  host {k:30s} median {statistics.median(v):7.3f} ms  max {max(v):7.3f}  n {len(v)}")
        del timer, bank, checks
        torch.cuda.empty_cache()
    print("fill kernel broken:", window_fill.BROKEN, "inputs module", inputs.__file__)


if __name__ == "__main__":
    main()
