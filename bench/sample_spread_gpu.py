"""The workers' samples, the baseline against itself (RMSNorm, every configured shape): how wide each side's
samples spread and how many were taken, under the variations that differ between tests/test_gpu.py and part (a) of
bench/evaluator.py: trials 2 or 1, the torch.compile column or not, the warm spare or not, and test_gpu's without the
candidate's seccomp filter (a diagnosis only: the judge skips runners/syscalls.py's install for that evaluator)
(SPREAD_VARIANTS: a comma list of their names; all by default).

    python3 bench/sample_spread_gpu.py OUT.json     (on the GPU machine; bench/h200_session.sh STEP=spread)

Prints one line a variant and case: self-speedup, both spreads (interquartile range over the median), samples, the
judge's ratio, and the variant's seconds of sampling."""
from __future__ import annotations

import json
import os
import sys
import time

from bench.evaluator import BACKEND, bundle_for, gpu_state
from runners import syscalls
from runners.sandbox import Evaluator

VARIANTS = [  # (name, trials, reference, spare, the candidate's seccomp filter)
    ("test_gpu", 2, True, True, True),
    ("no-reference", 2, False, True, True),
    ("no-spare", 2, False, False, True),
    ("trials1", 1, False, True, True),
    ("test_gpu-nofilter", 2, True, True, False),
]


def main(out: str) -> None:
    bundle = bundle_for("rms_norm")
    rows = []
    only = os.environ.get("SPREAD_VARIANTS")
    install = syscalls.install
    for name, trials, reference, spare, seccomp in VARIANTS:
        if only and name not in only.split(","):
            continue
        syscalls.install = install if seccomp else (lambda: False)
        started = time.perf_counter()
        with Evaluator(bundle, BACKEND, timeout=600, trials=trials, spare=spare) as ev:
            r = ev.evaluate(ev.baseline, seed=1, reference=reference)
        seconds = time.perf_counter() - started
        if not r.ok:
            print(f"{name}: {r.stage}: {r.error[:300]}")
            rows.append({"variant": name, "error": r.error[:300]})
            continue
        sampling = r.phases.get("timing.samples")
        for c in r.cases:
            row = {"variant": name, "case": c.case, "speedup": c.speedup, "spread_b": c.baseline_spread,
                   "spread_c": c.candidate_spread, "samples": c.samples, "judge_ratio": c.judge_ratio,
                   "baseline_us": c.baseline_us, "candidate_us": c.candidate_us,
                   "baseline_host_us": c.baseline_host_us, "candidate_host_us": c.candidate_host_us}
            rows.append(row)
            print(f"{name:13s} {c.case:32s} {c.speedup or 0:.4f}  spread {c.baseline_spread:.4f} "
                  f"{c.candidate_spread:.4f}  n={c.samples}  judge {c.judge_ratio or 0:.3f}  host "
                  f"{c.baseline_host_us or 0:.1f} {c.candidate_host_us or 0:.1f} us", flush=True)
        print(f"{name}: {seconds:.0f} s, sampling {sampling and round(sampling, 2)} s, gpu {gpu_state()}", flush=True)
    with open(out, "w") as f:
        json.dump({"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
