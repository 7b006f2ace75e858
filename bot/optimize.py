"""One optimisation job, start to finish, with no transport code: the CLI and (later) the webhook app call it.

    config -> target checks -> task bundle -> baseline check -> repo test before -> search
           -> champion verification (fresh process, new seeds, held-out cases, repo test) -> report -> apply
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import json
import logging
import secrets
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from evolver.candidate import Candidate
from evolver.engine import EngineOptions, new_archive, run_search
from evolver.engine import job_options as _job_options
from runners.extract import ExtractionError, build_bundle
from runners.extract import copy_reference
from runners.sandbox import Evaluator
from runners.task import TaskSpec

from .apply import apply_champion, branch_name, ensure_branch_free
from .config import KernelConfig, kernel_config, load_config, task_spec
from .errors import UserError
from .optimize_options import OptimizeOptions
from .repo_tests import run_test_with_source
from .report import build_report, write_report
from .target import Target, ensure_committed, open_target
from .verify import decide

log = logging.getLogger("kernelsmith")


@dataclass
class OptimizeResult:
    verdict: str  # improved | no_improvement | not_timed
    report: dict
    out: Path
    applied_commit: str | None = None


class Progress(Protocol):
    def stage(self, text: str, name: str = "") -> None: ...  # name: bot.jobs.states.STAGES
    def search_started(self, budget: int) -> None: ...
    def candidate_done(self, candidate: Candidate, best: float | None, failures: int) -> None: ...


class NoProgress:
    def stage(self, text: str, name: str = "") -> None:
        pass

    def search_started(self, budget: int) -> None:
        pass

    def candidate_done(self, candidate: Candidate, best: float | None, failures: int) -> None:
        pass


def resolve_backend(requested: str) -> str:
    import torch

    has_gpu = torch.cuda.is_available()
    if requested == "auto":
        return "triton" if has_gpu else "interpret"
    if requested == "triton" and not has_gpu:
        raise UserError("--backend triton needs a CUDA GPU, and torch sees none on this machine "
                        f"(torch {torch.__version__}, CUDA build: {bool(torch.version.cuda)})",
                        "Run on a GPU machine, or use --backend interpret (the CPU interpreter: correctness "
                        "only, no speed is measured).")
    if requested not in ("triton", "interpret"):
        raise UserError(f"unknown backend {requested!r}", "Use auto, triton or interpret.")
    return requested


def _check_out(out: Path, overwrite: bool, target_root: Path, repo_root: Path) -> None:
    """Refuse an output folder that would hold or overwrite the target, or a previous run, before any work."""
    for protected in (target_root, repo_root):
        if out == protected or protected.is_relative_to(out) or out.is_relative_to(repo_root / ".git"):
            raise UserError(f"--out {out} would hold or overwrite the target checkout {protected}",
                            "Choose an output folder outside the target, or a new subfolder of it such as runs/.")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UserError(f"output folder {out} already holds files",
                        "Choose another --out, or pass --overwrite to replace that run.")


def _prepare_out(out: Path) -> None:
    """The run folder, emptied (``_check_out`` allowed it in the preflight)."""
    if out.exists() and any(out.iterdir()):
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def _log_to(out: Path) -> logging.Handler:
    handler = logging.FileHandler(out / "run.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return handler


def _record(out: Path, candidate: Candidate) -> None:
    row = {"id": candidate.id, "operator": candidate.operator, "parent": candidate.parent_id,
           "generation": candidate.generation, "genome": candidate.genome, "sha256": candidate.sha256,
           "fitness": candidate.fitness, "evaluation": candidate.evaluation.to_dict()}
    with open(out / "candidates.jsonl", "a") as f:
        f.write(json.dumps(row, default=str) + "\n")
    ev = candidate.evaluation
    log.info("candidate %d (%s, parent %s): %s", candidate.id, candidate.operator, candidate.parent_id,
             ev.feedback.splitlines()[0] if ev.feedback else ev.stage)


def _reproduce_command(opts: OptimizeOptions, backend: str, seed: int) -> str:
    parts = ["kernelsmith", "optimize", str(opts.target), "--kernel", opts.kernel, "--backend", backend,
             "--budget", str(opts.budget), "--seed", str(seed), "--min-speedup", str(opts.min_speedup)]
    return shlex.join(parts)


@dataclass
class _Job:
    """What the cheap checks established, before anything is written."""

    target: Target
    kernel: KernelConfig
    backend: str
    spec: TaskSpec
    seed: int
    out: Path


def _preflight(opts: OptimizeOptions) -> _Job:
    """Every check before the run folder exists: bad input fails here, naming the file, the line and the fix,
    and nothing is written anywhere. The capture run (the repository's test with the entry's calls recorded)
    happens here too: its calls become cases, and it is the test run "before any change"."""
    from runners.extract import extraction_plan

    from .capture import captured_cases, run_capture
    from .config import CONFIG_PATH
    from .kernel_checks import (
        check_arguments,
        check_entry,
        check_import,
        check_test_paths,
        check_test_reaches,
        existing_test_paths,
    )
    from .repo_tests import TestSettings, parse_test
    from .target import resolve_python

    target = open_target(opts.target)
    _check_out(Path(opts.out).resolve(), opts.overwrite, target.root, Path(target.repo.working_tree_dir).resolve())
    config = load_config(target.root)
    kernel = kernel_config(config, opts.kernel, target.root)
    python = resolve_python(target.root, config.python_for(kernel), str(target.root / CONFIG_PATH))
    test = parse_test(kernel.test)
    check_test_paths(target.root, opts.kernel, test)
    check_entry(target.root, opts.kernel, kernel)
    check_arguments(target.root, opts.kernel, kernel)
    backend = resolve_backend(opts.backend)
    if opts.apply:
        ensure_branch_free(target, branch_name(opts.kernel, backend))
    try:
        plan = extraction_plan(target.root, kernel.path, kernel.entry)
    except ExtractionError as exc:
        raise UserError(f"cannot extract kernel `{opts.kernel}`: {exc}",
                        "Reach local helpers by relative imports, or by absolute imports of the host package that "
                        "exist in this checkout; install third-party packages in the `python:` environment.") from None
    ensure_committed(target, [*plan.files, *plan.host_files, *existing_test_paths(target.root, test)])
    check_test_reaches(target.root, opts.kernel, kernel, test, plan)
    import_paths = [str((target.root / plan.import_root).resolve())] if plan.package else []
    target.tests = TestSettings(python=python, env=dict(config.env), import_roots=[plan.import_root])
    check_import(target.root, opts.kernel, kernel, plan, backend, python, import_paths, env=dict(config.env))
    spec = task_spec(opts.kernel, kernel, backend)
    spec.target_commit = target.commit
    spec.python, spec.import_paths, spec.env = python, import_paths, dict(config.env)
    if kernel.capture and test.runs_pytest:
        log.info("capture: running %s once and recording the calls of %s", kernel.test, kernel.entry)
        capture = run_capture(target, kernel.test, plan.dotted, kernel.entry, backend)
        target.baseline_test = capture.run
        if capture.installed and capture.run.passed and not capture.calls:
            raise UserError(f"the test `{kernel.test}` passed without calling `{kernel.entry}` once "
                            f"({capture.run.command})",
                            "Point `test:` at the tests of this kernel (`kernelsmith scan` lists the tests that reach "
                            "each entry), so that a changed kernel is really tested.")
        cases, spec.captured = captured_cases(capture.calls, kernel, backend, kernel.captured_cases, spec.cases)
        spec.captured.update(plugin_error=capture.error, test=capture.run.command, limit=kernel.captured_cases,
                             configured=len(spec.cases), cuda_moved=capture.cuda_moved)
        spec.cases += cases
    seed = opts.seed if opts.seed is not None else secrets.randbits(31)
    return _Job(target, kernel, backend, spec, seed, Path(opts.out).resolve())


def _check_baseline(job: _Job, evaluator: Evaluator, progress: Progress) -> tuple[Candidate, dict]:
    """The kernel must run as it is, and the repository's test must pass before any change."""
    progress.stage("checking the baseline kernel", "baseline")
    baseline = Candidate(id=0, source=evaluator.baseline, operator="baseline")
    baseline.evaluation = evaluator.evaluate(baseline.source, secrets.randbits(62), reference=True)
    evaluation = baseline.evaluation
    if not evaluation.ok:
        error = evaluation.error.strip()
        if "ModuleNotFoundError" in error or "ImportError" in error:  # the preflight import ran another Python
            raise UserError(f"the workers cannot import {job.kernel.path}: {error}",
                            "Install what it imports in the workers' Python, or name the target's environment "
                            "with `python:` in .github/kernelsmith.yml.")
        from .kernel_checks import environment_fault, kernelsmith_fault

        own = kernelsmith_fault(error)
        if own:
            raise UserError(f"the kernel `{job.spec.kernel}` ({job.kernel.path}) could not be checked: {own}",
                            "Nothing is wrong with the kernel as far as kernelsmith knows; this kernel needs a "
                            "kernelsmith that supports it.")
        fault = environment_fault(error, job.backend, job.spec.files or [job.kernel.path], job.target.root)
        if fault:  # the interpreter or the missing GPU, not the kernel: say so instead of "fix the kernel"
            raise UserError(f"the kernel `{job.spec.kernel}` ({job.kernel.path}) could not be checked here: {fault}",
                            "Nothing is wrong with the kernel as far as kernelsmith knows; run it where it can run.")
        raise UserError(
            f"the kernel `{job.spec.kernel}` does not compile or run as it is in {job.kernel.path} "
            f"(stage {evaluation.stage}, on the configured or captured inputs): {error}",
            "Fix the kernel (or the `args`/`shapes` in .github/kernelsmith.yml, so that they describe calls the "
            "entry accepts), then try again." + _index_hint(job.spec))
    progress.stage("running the repository's test before any change", "baseline")
    before = job.target.baseline_test  # the capture run at HEAD, when there was one
    if before is None or not before.passed:
        before = run_test_with_source(job.target, job.spec.module, None, job.kernel.test, job.backend)
    if not before.passed:
        from .kernel_checks import test_environment_fault

        fault = test_environment_fault(before.output_tail, job.backend)
        if fault:  # a test written for a GPU, on the CPU interpreter: not the repository's fault either
            raise UserError(f"the repository's test `{before.command}` could not run here: {fault}",
                            "Nothing is wrong with the test as far as kernelsmith knows; run it where it can run.")
        raise UserError(f"the repository's own test fails before any change: `{before.command}` in "
                        f"{job.target.root} exited {before.returncode}:\n{before.output_tail}",
                        "Make the test pass on the unmodified code first; kernelsmith only proposes "
                        "changes that keep a passing test passing.")
    return baseline, dataclasses.asdict(before)


def _index_hint(spec: TaskSpec) -> str:
    """Integer tensors get random values; indices and offsets that must agree with other arguments cannot."""
    ints = [a.name for a in spec.args if a.is_tensor and a.dtype and a.dtype.startswith(("int", "uint"))]
    if not ints:
        return ""
    return (f" The integer tensors {', '.join(f'`{n}`' for n in ints)} get random values in their `low`..`high`: "
            "if they index other tensors or must agree with each other (lengths and the offsets summed from them), "
            "narrow `low`/`high` so that every value is in bounds for the configured shapes; captured cases replay "
            "the values the repository's tests passed.")


def _write_champion(job: _Job, baseline: Candidate, champion: Candidate) -> None:
    module = job.spec.module
    (job.out / "champion").mkdir(exist_ok=True)
    (job.out / "champion" / Path(module).name).write_text(champion.source)
    path = job.target.repo_path(module)
    diff = difflib.unified_diff(baseline.source.splitlines(True), champion.source.splitlines(True),
                                f"a/{path}", f"b/{path}")
    (job.out / "champion.diff").write_text("".join(diff))


def optimize(opts: OptimizeOptions, progress: Progress | None = None) -> OptimizeResult:
    progress = progress or NoProgress()
    job = _preflight(opts)
    _prepare_out(job.out)
    handler = _log_to(job.out)
    try:
        progress.stage("extracting the task bundle", "bundle")
        build_bundle(job.target.root, job.spec, job.out / "bundle")
        copy_reference(job.target.root, job.out / "bundle", job.spec.reference)
        log.info("job kernel=%s backend=%s budget=%d seed=%d target=%s@%s", opts.kernel, job.backend,
                 opts.budget, job.seed, job.target.root, job.target.commit)
        with Evaluator(job.out / "bundle", job.backend, timeout=opts.timeout, trials=opts.trials) as evaluator:
            baseline, before = _check_baseline(job, evaluator, progress)
            _record(job.out, baseline)
            engine_opts = EngineOptions(budget=opts.budget, models=opts.models, preset=opts.preset,
                                        operators=opts.operators, resume_from=opts.resume_from,
                                        job=_job_options(opts), **(opts.limits or {}))
            archive = new_archive(engine_opts)
            progress.search_started(opts.budget)

            def on_result(candidate: Candidate) -> None:
                _record(job.out, candidate)
                best = archive.best()
                progress.candidate_done(candidate, best.fitness if best else None, archive.failures)

            engine = run_search(evaluator, baseline, engine_opts, job.out, job.seed, on_result, archive=archive)
            summary, tuner = engine.summary, engine.describer
            log.info("tuner knobs: %s", [k.key for k in tuner.knobs])
            decision = decide(job, opts, archive, evaluator, progress)

        best = archive.best()
        champion = decision.champion
        changes = tuner.describe(champion.genome) if champion else []
        if champion:
            _write_champion(job, baseline, champion)
        report = build_report(
            spec=job.spec, backend=job.backend, verdict=decision.verdict, reason=decision.reason,
            shown=decision.shown, champion=champion, changes=changes, archive=archive,
            search={"budget": opts.budget, "evaluated": summary.evaluated, "failures": summary.failures,
                    "duplicates_rejected": summary.duplicates_rejected, "exhausted": summary.exhausted,
                    "best_fitness": best.fitness if best else None, "seed": job.seed,
                    "knobs": [k.key for k in tuner.knobs], "engine": engine.facts},
            repo_test=decision.repo_test, baseline_repo_test=before, trials=opts.trials,
            held_out_cases=len(job.spec.held_out) if champion else 0,
            target={"root": str(job.target.root), "commit": job.target.commit, "module": job.spec.module,
                    "test": job.kernel.test, "branch": job.target.branch},
            reproduce=_reproduce_command(opts, job.backend, job.seed), notes=[], min_speedup=opts.min_speedup,
            shown_kind=decision.shown_kind, capture=job.spec.captured,
            autotune=tuner.tuner.autotune_findings(archive))
        report["run"] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "seed": job.seed}
        applied = None
        if opts.apply and champion:
            branch = branch_name(opts.kernel, job.backend)
            title = f"kernelsmith: {opts.kernel} {report['champion']['geomean_speedup']:.2f}x faster on {job.backend}"
            applied = apply_champion(job.target, branch, job.spec.module, champion.source,
                                     title + "\n\n" + "".join(f"- {c}\n" for c in changes))
            report["applied"] = {"branch": branch, "commit": applied}
            log.info("applied on branch %s as %s", branch, applied)
        elif opts.apply:
            report["notes"].append("--apply did nothing: there is no verified improvement to commit.")
        write_report(job.out, report)
        log.info("verdict: %s %s", decision.verdict, decision.reason)
        return OptimizeResult(verdict=decision.verdict, report=report, out=job.out, applied_commit=applied)
    finally:
        log.removeHandler(handler)
        handler.close()
