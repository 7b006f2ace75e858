"""The evaluator on a GPU: stability, resolution, autotune pinning, throughput (issue 5, "Show that it works").

    python3 bench/evaluator.py --out DIR [--parts a,b,c,d] [--runs 5] [--pairs 100]

(a) the baseline against itself in ``--runs`` fresh evaluators (fresh oracle and candidate processes) on the
    example kernels at every configured shape: per-case self-speedups and max/min of the baseline's medians;
(b) a candidate made about 3 % slower (3 % more bytes read per row) ranked slower in ``--pairs`` paired
    evaluations, on one bandwidth-bound RMSNorm case;
(c) the autotuned LayerNorm against a copy of itself (the oracle's chosen configs pinned on the copy);
(d) candidates evaluated per minute for the RMSNorm task (launch-tuner candidates), with the evaluator's own
    overhead per candidate beyond compiling and timing.
(e) is the GPU test files, run by bench/evaluator_gpu.sh.
Writes DIR/evaluator.json and prints a short table.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config import load_config, task_spec
from evolver.launch_params import find_knobs, render
from runners.extract import build_bundle
from runners.extract import copy_reference
from runners.sandbox import Evaluator

EXAMPLE = ROOT / "examples" / "tinyserve"
BACKEND = "triton"  # --backend interpret: a dry run of this script on the CPU (its times mean nothing)
KERNELS = ["rms_norm", "silu_and_mul", "apply_rotary_pos_emb", "softmax", "layer_norm"]


def bundle_for(name: str, shapes: list[dict] | None = None, dtypes: list[str] | None = None) -> Path:
    kernel = load_config(EXAMPLE).kernels[name]
    if shapes is not None:
        kernel = kernel.model_copy(update={"shapes": shapes})
    if dtypes is not None:
        kernel = kernel.model_copy(update={"dtypes": dtypes})
    spec = task_spec(name, kernel, "triton")
    bundle = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    build_bundle(EXAMPLE, spec, bundle)
    copy_reference(EXAMPLE, bundle, spec.reference)
    return bundle


def part_a(runs: int, kernels: list[str], save=lambda partial: None, reference: bool = True) -> dict:
    out = {}
    for name in kernels:
        bundle = bundle_for(name)
        per_run = []
        for run in range(runs):
            with Evaluator(bundle, BACKEND, timeout=600, trials=1) as ev:
                r = ev.evaluate(ev.baseline, seed=1000 + run, reference=reference and run == 0)
            if not r.ok:
                per_run.append({"error": f"{r.stage}: {r.error[:300]}"})
                if not any("error" not in x for x in per_run) and len(per_run) >= 2:
                    raise SystemExit(f"part a: {name} fails twice in a row, stopping: {r.stage}: {r.error[:600]}")
                continue
            per_run.append({"_gpu": gpu_state(), **{c.case: {
                "speedup": c.speedup, "claimed": claimed(c), "baseline_us": c.baseline_us, "judge_ratio": c.judge_ratio,
                "spread": [c.baseline_spread, c.candidate_spread], "samples": c.samples,
                "slots": c.slots, "reference_us": c.reference_us, "message": c.message,
                # what runners/corroboration.py corroborate weighed (the walls, the oracle's parts, the slots): a
                # credit rule can be replayed on them offline (bench/clock_credit.py)
                "window_ms": c.window_ms, "window_parts": c.window_parts, "window_slots": c.window_slots,
                "window_claimed_parts": c.window_claimed_parts}
                for c in r.cases}})
            save({**out, name: {"runs": per_run}})  # each run kept, should the call be cut short
        good = [r for r in per_run if "error" not in r]
        cases = sorted({c for r in good for c in r if c != "_gpu"})
        summary = {}
        for case in cases:
            sp = [r[case]["speedup"] for r in good if case in r]
            med = [r[case]["baseline_us"] for r in good if case in r]
            summary[case] = {"self_speedup_min": min(sp), "self_speedup_max": max(sp),
                             "baseline_median_max_over_min": max(med) / min(med), "baseline_us": statistics.median(med),
                             "judge_ratio": [r[case]["judge_ratio"] for r in good if case in r],
                             "torch_compile_us": next((r[case]["reference_us"] for r in good
                                                       if r.get(case, {}).get("reference_us")), None)}
        out[name] = {"runs": per_run, "summary": summary}
        save(out)
    return out


def claimed(c) -> float | None:
    """The worker's own speedup where the judge credited less (``claimed_us``: capped by its clock, or at 1.0x
    where the clock did not resolve the size): a self-speedup of exactly 1.000 is often such a cap."""
    return c.baseline_us / c.claimed_us if c.claimed_us and c.baseline_us else None


SLOWER_PATCH = ("    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=0.0).to(tl.float32)\n",
                ("    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=0.0).to(tl.float32)\n"
                "    extra = tl.load(x_ptr + ((row + 7) % tl.num_programs(0)) * stride_x_row + offs,\n"
                "                    mask=offs < N // 32, other=0.0).to(tl.float32)\n"
                "    x = x + tl.where(tl.sum(extra, axis=0) != tl.sum(extra, axis=0), 1.0, 0.0)\n"))


def smi(*args: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, check=False).stdout.strip()
    except FileNotFoundError:
        return "no nvidia-smi"


def gpu_state() -> str:
    """SM and memory clocks, temperature and power right after a run (to explain drift between runs)."""
    return smi("--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw", "--format=csv,noheader",
               "-i", os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])


def part_b(pairs: int, save=lambda partial: None, protocol: str = "full") -> dict:
    bundle = bundle_for("rms_norm", shapes=[{"T": 4096, "H": 4096}], dtypes=["float16"])
    with Evaluator(bundle, BACKEND, timeout=600, trials=1) as ev:
        slower = ev.baseline.replace(*SLOWER_PATCH)
        assert slower != ev.baseline
        ratios, errors = [], []
        for i in range(pairs):
            r = ev.evaluate(slower, seed=5000 + i, trials=1, protocol=protocol)
            if not r.ok:
                errors.append(f"{r.stage}: {r.error[:300]}")
                continue
            if r.cases[0].speedup is None:
                errors.append(f"not timed: {r.cases[0].message}")
                continue
            ratios.append(r.cases[0].speedup)
            if i % 10 == 9:
                save(summary_b(pairs, ratios, errors, protocol))
    return summary_b(pairs, ratios, errors, protocol)


def summary_b(pairs: int, ratios: list[float], errors: list[str], protocol: str) -> dict:
    return {"case": "T=4096,H=4096/float16", "protocol": protocol, "pairs": pairs, "evaluated": len(ratios),
            "ranked_slower": sum(1 for x in ratios if x < 1.0),
            "mean_slowdown": 1 - statistics.mean(ratios) if ratios else None, "speedups": ratios, "errors": errors}


def part_c(runs: int, save=lambda partial: None, kernel: str = "layer_norm") -> dict:
    bundle = bundle_for(kernel)
    results = []
    for run in range(runs):
        with Evaluator(bundle, BACKEND, timeout=600, trials=1) as ev:
            copy = ev.baseline + "\n# a copy of the kernel module\n"
            r = ev.evaluate(copy, seed=9000 + run)
        results.append({"ok": r.ok, "error": r.error[:300],
                        "cases": {c.case: {"speedup": c.speedup, "claimed": claimed(c), "autotune": c.autotune}
                                  for c in r.cases}})
        save({"runs": results})
    sp = [c["speedup"] for r in results if r["ok"] for c in r["cases"].values() if c["speedup"] is not None]
    return {"runs": results, "min": min(sp) if sp else None, "max": max(sp) if sp else None}


def part_d(count: int, save=lambda partial: None, protocol: str = "search", prefetch: bool = True) -> dict:
    """``prefetch``: as the search runs it (evolver/loop.py): each evaluation in a thread, and the next candidate
    given to the evaluator at once, loaded and compiled in the warm spare while this one is judged."""
    bundle = bundle_for("rms_norm")
    with Evaluator(bundle, BACKEND, timeout=600, trials=2) as ev:
        knobs = find_knobs(ev.baseline)
        rng = random.Random(3)
        sources = []
        while len(sources) < count:
            genome = {k.key: rng.randrange(len(k.choices)) for k in rng.sample(knobs, k=min(2, len(knobs)))}
            src = render(ev.baseline, knobs, genome)
            if src not in sources and src != ev.baseline:
                sources.append(src)
        ev.evaluate(ev.baseline, seed=1)  # the oracle warm, as in a search
        rows = []
        requests = trace_requests()  # where the evaluations' worker round trips go, by role, op and kind of trial
        pool = ThreadPoolExecutor(max_workers=1)
        t0 = time.perf_counter()
        for i, src in enumerate(sources):
            running = pool.submit(ev.evaluate, src, seed=100 + i, protocol=protocol)
            if prefetch and i + 1 < len(sources):
                ev.prefetch(sources[i + 1])
            r = running.result()
            rows.append({"ok": r.ok, "stage": r.stage, "error": r.error[:600], "duration_s": r.duration_s,
                         "phases": r.phases, "fitness": r.fitness, "samples": [c.samples for c in r.cases]})
            save({"rows": rows, "wall_s_so_far": time.perf_counter() - t0})
        wall = time.perf_counter() - t0
        pool.shutdown()
    keys = sorted({k for r in rows for k in r["phases"]})
    phases = {k: statistics.mean(r["phases"].get(k, 0.0) for r in rows) for k in keys}
    per = statistics.mean(r["duration_s"] for r in rows)
    return {"protocol": protocol, "prefetch": prefetch, "candidates": count, "wall_s": wall,
            "per_minute": 60 * count / wall, "mean_s": per, "phases_mean_s": phases,
            "overhead_beyond_compile_and_timing_s": per - phases.get("correctness", 0.0) - phases.get("timing", 0.0),
            "requests_s_per_candidate": {k: round(v / count, 4) for k, v in sorted(requests.items())}, "rows": rows}


def trace_requests() -> dict:
    """Seconds spent waiting on worker replies, summed by role, op and kind of trial (``c3t1`` a trial, ``c3t2d``
    the dense call of a layout trial, ``w`` a padded layout, ``m``/``l`` masked), and the parts of a call the worker
    says it spent: a diagnosis of the judge's process from the bench."""
    import re

    from runners.processes import WorkerProcess

    spent: dict = {}
    plain_request, plain_send, plain_receive = WorkerProcess.request, WorkerProcess.send, WorkerProcess.receive

    def key_of(role: str, op: str, fields: dict) -> str:
        kind = re.sub(r"[0-9]+", "", str(fields.get("tag", "")))
        return f"{role}.{op}.{kind}" if kind else f"{role}.{op}"

    def request(self, op: str, *, spin_s: float = 0.0, **fields) -> dict:  # the round trip's wall (a paired
        t = time.perf_counter()  # trial's are in its phase)
        try:
            return plain_request(self, op, spin_s=spin_s, **fields)
        finally:
            key = key_of(self.role, op, fields)
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - t

    def send(self, op: str, **fields) -> None:
        self._trace_key = key_of(self.role, op, fields)
        return plain_send(self, op, **fields)

    def receive(self, spin_s: float = 0.0) -> dict:
        # a call's parts in the worker (runners/worker.py ``spent``): reading the inputs, the call, writing the
        # outputs, the commitments; the rest of the round trip is the pipe and the judge's side
        reply = plain_receive(self, spin_s)
        key = getattr(self, "_trace_key", "?")
        for part, seconds in (reply.get("spent") or {}).items():
            spent[f"{key}.{part}"] = spent.get(f"{key}.{part}", 0.0) + float(seconds)
        return reply

    WorkerProcess.request, WorkerProcess.send, WorkerProcess.receive = request, send, receive
    return spent


def environment() -> dict:
    import torch
    import triton

    return {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "nvidia_smi": smi("--query-gpu=name,driver_version", "--format=csv,noheader"),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parts", default="a,b,c,d")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--candidates", type=int, default=30)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--autotuned", default="layer_norm", help="(c): the autotuned kernel timed against its copy")
    ap.add_argument("--protocol", default="search", help="(b) and (d): the search's protocol, or full")
    ap.add_argument("--no-reference", action="store_true", help="(a) without the torch.compile column")
    ap.add_argument("--no-prefetch", action="store_true", help="(d) one candidate at a time, nothing loaded ahead")
    args = ap.parse_args()
    global BACKEND
    BACKEND = args.backend
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"environment": environment()}
    path = args.out / "evaluator.json"
    for part in args.parts.split(","):
        t0 = time.perf_counter()
        def save(partial: dict, part: str = part) -> None:  # what finished, should the run be cut short
            result[part] = partial
            path.write_text(json.dumps(result, indent=1, default=str))

        result[part] = {"a": lambda: part_a(args.runs, args.kernels.split(","), save, not args.no_reference),
                        "b": lambda: part_b(args.pairs, save, args.protocol),
                        "c": lambda: part_c(args.runs, save, args.autotuned),
                        "d": lambda: part_d(args.candidates, save, args.protocol, not args.no_prefetch)}[part]()
        result[part]["seconds"] = time.perf_counter() - t0
        path.write_text(json.dumps(result, indent=1, default=str))
        print(f"part {part} done in {result[part]['seconds']:.0f} s", flush=True)
    print_table(result)


def print_table(result: dict) -> None:
    if "a" in result:
        print("(a) baseline vs itself: kernel case | self-speedup min..max | medians max/min | judge ratio")
        for name, data in result["a"].items():
            if name == "seconds":
                continue
            for case, s in data["summary"].items():
                jr = [x for x in s["judge_ratio"] if x]
                print(f"  {name:22s} {case:34s} {s['self_speedup_min']:.4f}..{s['self_speedup_max']:.4f}  "
                      f"{s['baseline_median_max_over_min']:.4f}  {min(jr or [0]):.3f}..{max(jr or [0]):.3f}")
            for r in data["runs"]:
                if "error" in r:
                    print(f"  {name}: ERROR {r['error']}")
    if "b" in result:
        b = result["b"]
        print(f"(b) ~3% slower: {b.get('ranked_slower')}/{b.get('evaluated')} ranked slower, mean slowdown "
              f"{b.get('mean_slowdown') or 0:.4f}, refused {len(b.get('errors', []))}: {b.get('errors', [''])[:1]}")
    if "c" in result:
        c = result["c"]
        print(f"(c) autotuned copy vs itself: {c['min']}..{c['max']}")
    if "d" in result:
        d = result["d"]
        print(f"(d) {d['per_minute']:.1f} candidates/min, mean {d['mean_s']:.2f} s, phases {d['phases_mean_s']}, "
              f"overhead {d['overhead_beyond_compile_and_timing_s']:.2f} s")


if __name__ == "__main__":
    main()
