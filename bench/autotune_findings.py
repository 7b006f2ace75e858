"""Autotune findings of a finished run folder: per autotuned kernel, the fastest pinned config on each case,
and whether the autotune key can tell apart shapes that want different configs.

    python3 bench/autotune_findings.py runs/layer_norm [more run folders] > findings.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evolver.candidate import Candidate
from evolver.operators import LaunchTuner
from runners.results import Evaluation
from runners.task import baseline_source, read_task


def findings(run: Path) -> list[dict]:
    spec = read_task(run / "bundle")
    tuner = LaunchTuner(baseline_source(run / "bundle", spec), entry=spec.entry)
    rows = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines() if line.strip()]
    candidates = [Candidate(id=r["id"], source="", operator=r.get("operator", ""), genome=r.get("genome") or {},
                            evaluation=Evaluation.from_dict(r["evaluation"])) for r in rows if r.get("evaluation")]
    return tuner.autotune_findings(SimpleNamespace(candidates=candidates))


if __name__ == "__main__":
    print(json.dumps({arg: findings(Path(arg)) for arg in sys.argv[1:]}, indent=2))
