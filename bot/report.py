"""The run's report: the same facts as JSON (report.json) and as the pull-request body (report.md)."""
from __future__ import annotations

import dataclasses
import importlib.resources
import json
from collections import Counter
from pathlib import Path

import jinja2

from evolver.archive import Archive
from evolver.candidate import Candidate
from evolver.search_facts import defuse
from runners.results import Evaluation
from runners.task import TaskSpec


def _env() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(
        lambda name: importlib.resources.files("templates").joinpath(name).read_text(encoding="utf-8"))
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def render_markdown(report: dict, template: str = "pr/body.md.j2") -> str:
    return _env().get_template(template).render(r=report)


def failures_by_stage(archive: Archive) -> dict[str, int]:
    stages = Counter(c.evaluation.stage for c in archive.candidates if c.evaluation and not c.evaluation.ok)
    return dict(stages.most_common())


def build_report(*, spec: TaskSpec, backend: str, verdict: str, reason: str, shown: Evaluation,
                 champion: Candidate | None, changes: list[str], archive: Archive, search: dict,
                 repo_test: dict | None, baseline_repo_test: dict | None, trials: int, held_out_cases: int,
                 target: dict, reproduce: str, notes: list[str], min_speedup: float = 1.03,
                 shown_kind: str = "baseline", capture: dict | None = None,
                 autotune: list[dict] | None = None) -> dict:
    """``shown`` is the evaluation whose per-case rows are reported; ``shown_kind`` says whose it is:
    champion (its verification), best_candidate, or baseline (timed against itself). ``capture`` is what the
    capture run recorded (``TaskSpec.captured``), ``autotune`` the tuner's findings on autotuned kernels."""
    shown_dict = shown.to_dict()
    rows = shown_dict["cases"]
    methods = sorted({r["timing_method"] for r in rows if r.get("timing_method")})
    tolerances = {d: dataclasses.asdict(spec.tolerance(d)) for d in sorted({c.dtype for c in spec.cases})}
    # A geometric mean can hide cases that got slower; a reviewer must see them (2% is within timing noise).
    regressions = [{"case": r["case"], "speedup": r["speedup"]} for r in rows
                   if r.get("speedup") is not None and r["speedup"] < 0.98]
    # An atol above the outputs' typical magnitude makes the comparison accept outputs that are entirely wrong
    # there (a softmax over 32000 columns has outputs near 3e-5): the config's tolerance is a finding in itself.
    loose = [{"case": r["case"], "atol": spec.tolerance(d).atol, "output_scale": r["output_scale"]}
             for r in rows if r.get("output_scale") is not None
             and (d := r["case"].rsplit("/", 1)[-1]) in tolerances and spec.tolerance(d).atol >= r["output_scale"]]
    return {
        "kernel": spec.kernel,
        "backend": backend,
        "verdict": verdict,
        "reason": defuse(reason),  # may quote a candidate's error (its exception text is its own)
        "timed": shown.timed,
        "shown": shown_kind,
        "timing_method": ", ".join(methods) or None,
        "target": target,
        "champion": None if champion is None else {
            "candidate_id": champion.id,
            "operator": champion.operator,
            "sha256": champion.sha256,
            "geomean_speedup": shown.fitness,
            "changes": changes,
            "genome": champion.genome,
        },
        "cases": rows,
        "min_speedup": min_speedup,
        "regressions": sorted(regressions, key=lambda r: r["speedup"]),
        "correctness": {
            "trials": trials,
            "held_out_cases": held_out_cases,
            "max_err_ratio": max((r["err_ratio"] for r in rows), default=0.0),
            "tolerances": tolerances,
            "loose_tolerances": loose,
            "repo_test": repo_test,
            "baseline_repo_test": baseline_repo_test,
        },
        "search": {**search, "failures_by_stage": failures_by_stage(archive)},
        "environment": shown_dict["env"] or {},
        "capture": capture or None,
        "autotune": autotune or [],
        "reproduce": {"command": reproduce},
        "notes": [defuse(n) for n in notes],
    }


def write_report(out: Path, report: dict) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "report.md").write_text(render_markdown(report))
