"""Whether a worker's sample time depends on where its slots lie (the twenty-first session: RMSNorm's baseline against
itself read 0.86-0.88x at T=1 in some evaluators, both sides' samples within 0.2 %, and 1.00x in others).

One process, as a worker does it (runners/worker.py's prepare_timing and sample, the bank's fill, the graph, the lead),
with no judge and no second worker: for each case of RMSNorm at T=1, the slot bank is made afresh PREPS times (new
allocations and a new graph each), and ten samples are taken of each. If the medians of the preparations differ by
several per cent while each preparation's samples agree, the offset comes with the allocation, not with the process;
if they agree, it comes with the process (its context, its environment, the candidate's audit hook or filter).
The second half does the same with a second module of the same source (a candidate's copy, loaded as the candidate
worker loads it) in the same process.

HOLD=1 tells the two causes of a preparation's offset apart (the twenty-second session: the first preparation in a
process read 1.44 us, every later one 1.61 us): each preparation's bank is kept alive (new addresses every time), and
after all of them each kept bank is sampled again, in order and then in reverse. An offset that stays with its bank is
the allocation's; one that goes with the moment it was sampled is the device's state (clocks) or the process's.

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
from runners.timing import tiny_graph
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


def _setup() -> tuple:
    """RMSNorm's bundle, its task, the protocol, and a judge's clock for its slot count only (as the judge sizes a
    case's bank)."""
    bundle = bundle_for("rms_norm")
    spec = read_task(bundle)
    clock = TimingSteps.__new__(TimingSteps)
    clock.spec = spec
    return bundle, spec, Protocol(), clock


def _samples(w: Server, per_call: float, count: int, p: Protocol) -> list[float]:
    replays = max(1, int(p.sample_us / (max(per_call, 0.5) * count)) + 1)
    return [w.sample({"replays": replays, "lead_cycles": p.sample_lead_cycles})["us"] for _ in range(SAMPLES)]


def hold(out: str) -> None:
    """Each preparation's bank kept, then sampled again in order and in reverse (module docstring)."""
    bundle, spec, p, clock = _setup()
    w = _worker(bundle, "ks_baseline")
    rows = []
    for case in [c for c in spec.cases if c.symbols.get("T") == 1][:int(os.environ.get("HOLD_CASES", "2"))]:
        label = f"{','.join(f'{k}={v}' for k, v in case.symbols.items())}/{case.dtype}"
        count = clock._slot_count(case, p.slot_us, p.slot_bytes, p.max_slots)
        kept = []
        for prep in range(PREPS):
            bank = {"args": [dataclasses.asdict(a) for a in spec.args], "case": dataclasses.asdict(case),
                    "count": count, "seed": 1000 + prep, "which": "sample"}
            per_call = w.prepare_timing(bank)["per_call_us"]
            timer = w.timers.pop("sample")  # kept alive: the next bank lies elsewhere
            w.timers["sample"] = timer
            first = statistics.median(_samples(w, per_call, count, p))
            w.timers.pop("sample")
            ptr = next(iter(timer.bank.blocks.values())).data_ptr()
            kept.append((timer, per_call, first, ptr))
        again: dict[int, list[float]] = {k: [] for k in range(len(kept))}
        for order in (list(range(len(kept))), list(reversed(range(len(kept))))):
            for k in order:
                timer, per_call = kept[k][0], kept[k][1]
                w.timers["sample"] = timer
                again[k].append(statistics.median(_samples(w, per_call, count, p)))
                w.timers.pop("sample")
        for k, (_, _, first, ptr) in enumerate(kept):
            rows.append({"case": label, "prep": k, "first_us": first, "again_us": again[k], "ptr": ptr, "slots": count})
            print(f"{label:32s} prep {k}  first {first:.4f}  in order {again[k][0]:.4f}  reversed {again[k][1]:.4f}"
                  f"  block at {ptr:#x} (mod 2 MiB {ptr % (2 << 20):#x})", flush=True)
        del kept
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    with open(out, "w") as f:
        json.dump({"rows": rows, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__}, f, indent=1)


def between(out: str, what: str) -> None:
    """What ends the first preparation's fast reading (HOLD=2, EVENT=what): its bank sampled, then one event, then
    the same bank sampled again. sleep: two seconds idle; graph: an unrelated tiny CUDA graph captured and replayed;
    alloc: 64 MiB allocated and written; bank: a second slot bank made (no graph); prep: a second timer prepared;
    graphdel: a tiny graph made, replayed and destroyed; early: a tiny graph made and destroyed before the first timer;
    ballast: a tiny graph made before the first timer and kept."""
    bundle, spec, p, clock = _setup()
    w = _worker(bundle, "ks_baseline")
    case = [c for c in spec.cases if c.symbols.get("T") == 1][0]
    count = clock._slot_count(case, p.slot_us, p.slot_bytes, p.max_slots)

    def req(seed: int) -> dict:
        return {"args": [dataclasses.asdict(a) for a in spec.args], "case": dataclasses.asdict(case),
                "count": count, "seed": seed, "which": "sample"}

    kept = [tiny_graph()] if what == "ballast" else []  # a tiny graph alive from before the timer's
    if what == "early":  # a tiny graph made and destroyed before the timer's: is it the process's history?
        g = tiny_graph()
        del g
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    per_call = w.prepare_timing(req(1000))["per_call_us"]
    before = statistics.median(_samples(w, per_call, count, p))
    if what == "sleep":
        time.sleep(2.0)
    elif what == "graph":
        kept.append(tiny_graph())
    elif what == "graphdel":  # made, replayed and destroyed: does the state last after the second graph is gone?
        del kept[:]
        g = tiny_graph()
        del g
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    elif what == "alloc":
        kept.append(torch.ones(16 << 20, device="cuda"))
    elif what == "bank":
        kept.append(w._bank(req(1001)))
    elif what == "prep":
        timer = w.timers.pop("sample")
        w.prepare_timing(req(1001))
        kept.append(w.timers.pop("sample"))
        w.timers["sample"] = timer
    torch.cuda.synchronize()
    after = [statistics.median(_samples(w, per_call, count, p)) for _ in range(3)]
    print(f"{what:6s} before {before:.4f}  after {' '.join(f'{a:.4f}' for a in after)}", flush=True)
    with open(out, "w") as f:
        json.dump({"event": what, "before_us": before, "after_us": after, "slots": count,
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__}, f, indent=1)


def main(out: str) -> None:
    bundle, spec, p, clock = _setup()
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
    if os.environ.get("HOLD") == "2":
        sys.exit(between(sys.argv[1], os.environ.get("EVENT", "sleep")))
    sys.exit(hold(sys.argv[1]) if os.environ.get("HOLD") == "1" else main(sys.argv[1]))
