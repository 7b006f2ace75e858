"""Diagnostics of the judge's clock on a GPU: the baseline against itself, per case, under protocol variants.
Prints claimed medians, the judge's pass wall times per round and the judge's speedup.
    python3 bench/judge_diag.py [kernel] [variant,...]   (DIAG_SHAPES='[{"M": 8192, "N": 4096}]' DIAG_DTYPES=bfloat16)"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.evaluator import bundle_for
from runners.judge import Protocol
from runners.sandbox import Evaluator

VARIANTS = {
    "default": Protocol(),
    "no-lead": Protocol(window_lead_cycles=0),
    "fits-L2": Protocol(window_bytes=24 << 20),
    "long-samples": Protocol(sample_us=8000.0, case_time_cap_s=4.0),
    "no-sample-lead": Protocol(sample_lead_cycles=0),
    "no-lead-long": Protocol(sample_lead_cycles=0, sample_us=8000.0, case_time_cap_s=4.0),
    # the window's checkpoints (runners/checkpoints.py): none, the default (an eighth of the calls, at most 256), and
    # after every call (what would hide from a worker which calls are checked: round 16's open xfail), to see what
    # they cost the judge's clock once their time alone is taken off
    "no-checkpoints": Protocol(checkpoint_share=0.0, checkpoint_least=0),
    "every-call": Protocol(checkpoint_share=1.0, checkpoint_most=1 << 20),
    # the clock's noise (fifteenth session): ten rounds a side, with and without the quiet window (no garbage
    # collection, replies polled for), and with four times the window's memory (a longer pass at large calls)
    "rounds10": Protocol(window_rounds=10),
    "rounds10-loud": Protocol(window_rounds=10, window_quiet=False),
    "big-window": Protocol(window_rounds=6, window_bytes=24 << 30),
}


def main() -> None:
    kernel = sys.argv[1] if len(sys.argv) > 1 else "rms_norm"
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(VARIANTS)
    # DIAG_SHAPES (a JSON list of shape dicts) and DIAG_DTYPES (comma list): only these cases are run
    shapes = json.loads(os.environ["DIAG_SHAPES"]) if os.environ.get("DIAG_SHAPES") else None
    dtypes = os.environ["DIAG_DTYPES"].split(",") if os.environ.get("DIAG_DTYPES") else None
    bundle = bundle_for(kernel, shapes, dtypes)
    for name, protocol in ((n, VARIANTS[n]) for n in names):  # a name may repeat: each run is a fresh evaluator
        protocol = dataclasses.replace(protocol)
        protocol.corroboration_tolerance = 10.0  # measure, do not refuse
        with Evaluator(bundle, "triton", timeout=600, trials=1, spare=False, protocol=protocol) as ev:
            r = ev.evaluate(ev.baseline, seed=11)
        if not r.ok:
            print(name, "ERROR", r.stage, r.error[:300])
            continue
        for c in r.cases:
            print(f"{name:8s} {c.case:30s} self-speedup {c.baseline_us / c.candidate_us:.4f} "
                  f"med {c.baseline_us:8.3f}/{c.candidate_us:8.3f} spread "
                  f"{c.baseline_spread:.3f}/{c.candidate_spread:.3f} n={c.samples} slots={c.slots} "
                  f"judge_ratio {c.judge_ratio if c.judge_ratio is None else round(c.judge_ratio, 3)} "
                  f"walls {c.window_ms} oracle parts {c.window_parts} candidate's parts {c.window_claimed_parts} "
                  f"{c.message}", flush=True)


if __name__ == "__main__":
    main()
