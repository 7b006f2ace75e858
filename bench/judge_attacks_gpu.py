"""Every GPU cheat through the real judge, one line each as soon as it is judged (a run cut short still says
what it saw), with the baseline and the honest rewrite as controls and where each evaluation spent its time.

    python3 bench/judge_attacks_gpu.py --out DIR [--timeout 90] [cheat.py ...]

The verdicts the tests expect are in tests/test_gpu.py and tests/test_gpu_attacks.py; this script only shows
what happened (stage, error, per-case claimed and credited speedups, the judge's ratio, the own-kernel share).
The destructive cheats (kill the judge, rewrite runners/, jams, FIFOs) are committed inert and only armed by their
CPU tests: they are never in the default list.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config import load_config, task_spec  # noqa: E402
from runners.extract import build_bundle  # noqa: E402
from runners.sandbox import Evaluator  # noqa: E402

CHEATS = ROOT / "tests" / "cheats"
DEFAULT = ["token_triton_kernel.py", "skips_work_under_capture.py", "content_keyed_cache.py", "skips_graph_replays.py",
           "lazy_token_kernel.py", "forges_sample_times.py", "forges_kernel_profile.py", "precomputes_on_refill.py",
           "overwrites_oracle_reveal.py", "forges_samples_at_decode.py", "derives_window_seed.py",
           "negative_sample_times.py", "detects_the_profiler.py", "torch_below_the_largest_case.py",
           "skips_calls_in_the_samples_graph.py", "forges_window_commitments.py", "hogs_the_gpu_while_idle.py",
           "sheds_the_window_extra.py", "sheds_part_of_the_window_extra.py", "recovers_the_secret.py",
           "kernel_named_void.py", "remembers_inputs.py", "slowed_oracle.py", "patches_timer.py",
           "detects_capture.py", "side_stream.py", "torch_only.py", "lazy_after_warmup.py"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--timeout", type=float, default=90.0)
    ap.add_argument("--kernel", default="rms_norm")
    ap.add_argument("--backend", default="triton", help="interpret: a dry run of this script on the CPU")
    ap.add_argument("cheats", nargs="*")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    example = ROOT / "examples" / "tinyserve"
    spec = task_spec(args.kernel, load_config(example).kernels[args.kernel], args.backend)
    bundle = Path(tempfile.mkdtemp(prefix="attacks-"))
    build_bundle(example, spec, bundle)
    rows = []
    with Evaluator(bundle, args.backend, timeout=args.timeout, trials=2) as ev:
        names = ["BASELINE", "honest_rewrite.py", *(args.cheats or DEFAULT)]
        for name in names:
            if name != "BASELINE" and not (CHEATS / name).is_file():
                print(f"{name}: no such cheat", flush=True)
                continue
            source = ev.baseline if name == "BASELINE" else (CHEATS / name).read_text()
            t0 = time.perf_counter()
            r = ev.evaluate(source, seed=5, time_it=True, trials=2, static_policy=False)
            row = {"cheat": name, "ok": r.ok, "stage": r.stage, "error": r.error[:400], "seconds": time.perf_counter() - t0,
                   "phases": {k: round(v, 2) for k, v in r.phases.items()},
                   "cases": [{"case": c.case, "speedup": c.speedup, "claimed": (c.baseline_us / c.claimed_us)
                              if c.claimed_us and c.baseline_us else None, "judge_ratio": c.judge_ratio,
                              "own_share": c.own_kernel_share, "window_ms": c.window_ms} for c in r.cases]}
            rows.append(row)
            speed = " ".join(f"{c['speedup']:.3f}" + (f"(claim {c['claimed']:.2f})" if c["claimed"] else "")
                             for c in row["cases"] if c["speedup"])
            print(f"{name:40s} ok={r.ok!s:5s} stage={r.stage:12s} {row['seconds']:5.1f}s {row['phases']} | {speed} | "
                  f"{r.error[:240]!r}", flush=True)
            (args.out / "attacks.json").write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
