"""Real, tiny pipelines for the App's tests, with the signature of bot.optimize.optimize: each reads the
target's config, reports progress through the same Progress calls, and writes a real run folder (report.json,
report.md, candidates.jsonl, champion/<module>.py, champion.diff). The service runs them in its scrubbed
worker process, named by KS_PIPELINE=app.pipelines:<name>."""
from __future__ import annotations

import difflib
import json
import os
import time
from pathlib import Path

from dataclasses import dataclass

from bot.config import kernel_config, load_config


@dataclass
class OptimizeResult:
    """bot.optimize.OptimizeResult's fields (test_job_store.py checks that they agree), defined here because
    importing bot.optimize loads torch and the judge: seconds in every job's worker that these pipelines never
    use (they run no kernel)."""

    verdict: str  # improved | no_improvement | not_timed
    report: dict
    out: Path
    applied_commit: str | None = None


FITNESS = [1.01, 0.97, 1.04, 1.02, 1.08, 1.05, 1.11, 1.09, 1.10, 1.12]


def _run(opts, progress, verdict: str, delay: float) -> OptimizeResult:
    target, out = Path(opts.target), Path(opts.out)
    kernel = kernel_config(load_config(target), opts.kernel, target)  # UserError: invalid config, unknown kernel
    out.mkdir(parents=True, exist_ok=True)
    progress.stage("extracting the task bundle", "bundle")
    source = (target / kernel.path).read_text()
    progress.stage("checking the baseline kernel", "baseline")
    progress.search_started(opts.budget)
    rows, best = [{"id": 0, "operator": "baseline", "fitness": 1.0}], None
    for i in range(1, opts.budget + 1):
        time.sleep(delay)
        fitness = FITNESS[(i - 1) % len(FITNESS)] if verdict == "improved" else 0.99
        best = fitness if best is None else max(best, fitness)
        rows.append({"id": i, "operator": "launch_tuner", "fitness": fitness})
        progress.candidate_done(None, best, 0)
    (out / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "worker_env.json").write_text(json.dumps(sorted(os.environ)))
    leaked = [k for k, v in os.environ.items() if "PRIVATE KEY" in v or v.startswith("ghs_")]
    progress.stage("verifying the champion", "verify")
    champion = None
    if verdict == "improved":
        champion = source + f"\n# launch configuration chosen by job {out.parent.name}\n"
        (out / "champion").mkdir(exist_ok=True)
        (out / "champion" / Path(kernel.path).name).write_text(champion)
        (out / "champion.diff").write_text("".join(difflib.unified_diff(
            source.splitlines(True), champion.splitlines(True), f"a/{kernel.path}", f"b/{kernel.path}")))
    reason = "" if verdict == "improved" else f"No candidate beat the baseline by the required 1.03x (best: {best}x)."
    report = {"verdict": verdict, "reason": reason, "target": {"module": kernel.path, "commit": None},
              "champion": {"geomean_speedup": best} if champion else None, "leaked_secrets": leaked,
              "search": {"budget": opts.budget, "evaluated": opts.budget}}
    (out / "report.json").write_text(json.dumps(report))
    (out / "report.md").write_text(
        f"## kernelsmith: `{opts.kernel}`\n\nVerdict: **{verdict}**\n\n| case | speedup |\n| --- | --- |\n"
        + "".join(f"| T={t} | {f:.2f}x |\n" for t, f in zip((1, 512, 4096), FITNESS[2:5])))
    return OptimizeResult(verdict=verdict, report=report, out=out)


def tiny(opts, progress):
    return _run(opts, progress, "improved", 0.0)


def tiny_no_gain(opts, progress):
    return _run(opts, progress, "no_improvement", 0.0)


def slow(opts, progress):
    """Slow enough to be caught mid-search (killed, cancelled); a later attempt of the same job (resumed after a
    restart: the job's folder, the parent of `out`, is kept) need not be caught again, so it goes 4x faster."""
    first = Path(opts.out).parent / "slow-pipeline-started"
    delay = 0.1 if first.exists() else 0.4
    first.parent.mkdir(parents=True, exist_ok=True)
    first.touch()
    return _run(opts, progress, "improved", delay)


def by_kernel(opts, progress):
    """softmax finds nothing; every other kernel improves."""
    return _run(opts, progress, "no_improvement" if opts.kernel == "softmax" else "improved", 0.0)
