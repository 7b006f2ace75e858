"""Whether a worker's sample time depends on where its slots lie (the twenty-first session: RMSNorm's baseline against
itself read 0.86-0.88x at T=1 in some evaluators, both sides' samples within 0.2 %, and 1.00x in others).

One process, as a worker does it (runners/worker.py's prepare_timing and sample, the bank's fill, the graph, the lead),
with no judge and no second worker: for each case of RMSNorm at T=1, the slot bank is made afresh PREPS times (new
allocations and a new graph each), and ten samples are taken of each. If the medians of the preparations differ by
several per cent while each preparation's samples agree, the offset comes with the allocation, not with the process;
if they agree, it comes with the process (its context, its environment, the candidate's audit hook or filter).
The second half does the same with a second module of the same source (a candidate's copy, loaded as the candidate
worker loads it) in the same process.

    python3 bench/placement_gpu.py OUT.json     (on the GPU machine; bench/h200_session.sh STEP=placement)
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.evaluator import bundle_for
from runners.judge_clock import TimingSteps
from runners.processes import materialize, read_baseline
from runners.protocol import Protocol
from runners.sample_stats import spread
from runners.task import read_task
from runners.worker import Server

PREPS = int(os.environ.get("PREPS", "8"))
SAMPLES = 10


def _worker(bundle: Path, package: str) -> Server:
    spec = read_task(bundle)
    workdir = Path(tempfile.mkdtemp(prefix=f"placement-{package}-"))
    name = materialize(read_baseline(bundle), spec.module, workdir, package, None)
    w = Server(None)
    info = w.load({"device": "cuda", "exchange": str(workdir), "outbox": str(workdir), "workdir": str(workdir),
                   "import_paths": spec.import_paths, "module_name": name, "entry": spec.entry})
    assert info.get("ok"), info
    importlib.invalidate_caches()
    return w


def main(out: str) -> None:
    bundle = bundle_for("rms_norm")
    spec = read_task(bundle)
    p = Protocol()
    clock = TimingSteps.__new__(TimingSteps)  # only its slot count, as the judge sizes a case's bank
    clock.spec = spec
    rows = []
    workers = {"oracle": _worker(bundle, "ks_baseline"), "copy": _worker(bundle, "ks_candidate")}
    for case in [c for c in spec.cases if c.symbols.get("T") == 1]:
        label = f"{','.join(f'{k}={v}' for k, v in case.symbols.items())}/{case.dtype}"
        count = clock._slot_count(case, p.slot_us, p.slot_bytes, p.max_slots)
        for role, w in workers.items():
            medians = []
            for prep in range(PREPS):
                bank = {"args": [dataclasses.asdict(a) for a in spec.args], "case": dataclasses.asdict(case),
                        "count": count, "seed": 1000 + prep, "which": "sample"}
                per_call = w.prepare_timing(bank)["per_call_us"]
                replays = max(1, int(p.sample_us / (max(per_call, 0.5) * count)) + 1)
                samples = [w.sample({"replays": replays, "lead_cycles": p.sample_lead_cycles})["us"]
                           for _ in range(SAMPLES)]
                medians.append(statistics.median(samples))
                rows.append({"case": label, "role": role, "prep": prep, "median_us": medians[-1],
                             "spread": spread(samples), "slots": count, "replays": replays})
                print(f"{label:32s} {role:6s} prep {prep}  {medians[-1]:.4f} us  spread {spread(samples):.4f}",
                      flush=True)
            print(f"{label:32s} {role:6s} max/min of the medians {max(medians) / min(medians):.4f}", flush=True)
    with open(out, "w") as f:
        json.dump({"rows": rows, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
