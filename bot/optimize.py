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
import random
import secrets
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from evolver.archive import Archive
from evolver.candidate import Candidate
from evolver.loop import evolve
from evolver.operators import LaunchTuner
from runners.extract import ExtractionError, build_bundle, local_imports
from runners.results import Evaluation
from runners.sandbox import Evaluator

from .apply import apply_champion, branch_name, ensure_branch_free
from .config import kernel_config, load_config, task_spec
from .errors import UserError
from .repo_tests import run_test_with_source
from .report import build_report, write_report
from .target import ensure_committed, open_target

log = logging.getLogger("kernelsmith")


@dataclass
class OptimizeOptions:
    target: Path
    kernel: str
    out: Path
    budget: int = 24
    backend: str = "auto"  # auto | triton | interpret
    apply: bool = False
    seed: int | None = None  # the search's RNG; correctness inputs always use fresh secret seeds
    min_speedup: float = 1.03  # a champion must beat the baseline by this factor, re-timed
    trials: int = 3
    timeout: float = 300.0
    overwrite: bool = False


@dataclass
class OptimizeResult:
    verdict: str  # improved | no_improvement | not_timed
    report: dict
    out: Path
    applied_commit: str | None = None


class Progress(Protocol):
    def stage(self, text: str) -> None: ...
    def search_started(self, budget: int) -> None: ...
    def candidate_done(self, candidate: Candidate, best: float | None, failures: int) -> None: ...


class NoProgress:
    def stage(self, text: str) -> None:
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


def _prepare_out(out: Path, overwrite: bool) -> None:
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise UserError(f"output folder {out} already holds files",
                            "Choose another --out, or pass --overwrite to replace that run.")
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
             "--budget", str(opts.budget), "--seed", str(seed), "--min-speedup", str(opts.min_speedup),
             "--out", str(opts.out)]
    return shlex.join(parts)


def _verify(evaluator: Evaluator, champion: Candidate, spec, min_speedup: float, trials: int,
            target, kernel, backend: str) -> tuple[Evaluation | None, str, dict | None]:
    """Re-check the champion: new process, new seeds, held-out cases, re-timed, the repo's test.

    Returns (verification evaluation, failure reason or '', repo test run)."""
    check = evaluator.evaluate(champion.source, secrets.randbits(62), time_it=True, trials=trials + 2)
    if not check.ok:
        return check, f"the champion failed re-verification ({check.feedback})", None
    if (check.fitness or 0) < min_speedup:
        return check, (f"the best candidate measured {champion.fitness:.3f}x in the search but "
                       f"{check.fitness:.3f}x when re-timed in a fresh process, under the "
                       f"{min_speedup:.2f}x bar"), None
    if spec.held_out:
        held = evaluator.evaluate(champion.source, secrets.randbits(62), time_it=False, case_set="held_out",
                                  trials=trials)
        if not held.ok:
            return check, f"the champion is wrong on a held-out case ({held.feedback})", None
    test = run_test_with_source(target, spec.module, champion.source, kernel.test, backend)
    test_dict = dataclasses.asdict(test)
    if not test.passed:
        return check, f"the repository's test fails with the champion in place:\n{test.output_tail}", test_dict
    return check, "", test_dict


def optimize(opts: OptimizeOptions, progress: Progress | None = None) -> OptimizeResult:
    progress = progress or NoProgress()
    # Cheap checks first, so that bad input fails in seconds and nothing is written anywhere.
    target = open_target(opts.target)
    config = load_config(target.root)
    kernel = kernel_config(config, opts.kernel, target.root)
    if not (target.root / kernel.test).exists():
        raise UserError(f"the test {kernel.test} named for `{opts.kernel}` does not exist in {target.root}",
                        "Fix `test:` in .github/kernelsmith.yml to point at the pytest file for this kernel.")
    backend = resolve_backend(opts.backend)
    branch = branch_name(opts.kernel, backend)
    if opts.apply:
        ensure_branch_free(target, branch)
    out = Path(opts.out).resolve()
    spec = task_spec(opts.kernel, kernel, backend)
    spec.target_commit = target.commit
    seed = opts.seed if opts.seed is not None else secrets.randbits(31)
    rng = random.Random(seed)
    try:
        files = local_imports(target.root, spec.module) if (target.root / spec.module).is_file() else None
    except ExtractionError as exc:
        raise UserError(f"cannot extract kernel `{opts.kernel}`: {exc}",
                        "Keep the kernel module and its local helpers importable with relative imports.") from None
    if files is None:
        raise UserError(f"the module {spec.module} named for `{opts.kernel}` does not exist in {target.root}",
                        "Fix `path:` in .github/kernelsmith.yml (relative to the repository root).")
    ensure_committed(target, [*files, kernel.test])

    _prepare_out(out, opts.overwrite)
    handler = _log_to(out)
    try:
        progress.stage("extracting the task bundle")
        build_bundle(target.root, spec, out / "bundle")
        log.info("job kernel=%s backend=%s budget=%d seed=%d target=%s@%s", opts.kernel, backend, opts.budget,
                 seed, target.root, target.commit)

        with Evaluator(out / "bundle", backend, timeout=opts.timeout, trials=opts.trials) as evaluator:
            progress.stage("checking the baseline kernel")
            baseline = Candidate(id=0, source=evaluator.baseline, operator="baseline")
            baseline.evaluation = evaluator.evaluate(baseline.source, secrets.randbits(62))
            if not baseline.evaluation.ok:
                raise UserError(
                    f"the kernel `{opts.kernel}` does not compile or run as it is in {kernel.path} "
                    f"(stage {baseline.evaluation.stage}): {baseline.evaluation.error.strip()}",
                    "Fix the kernel (or the `args`/`shapes` in .github/kernelsmith.yml) so that it runs, then try again.")
            progress.stage("running the repository's test before any change")
            before = run_test_with_source(target, spec.module, None, kernel.test, backend)
            if not before.passed:
                raise UserError(f"the repository's own test fails before any change: `{before.command}` in "
                                f"{target.root} exited {before.returncode}:\n{before.output_tail}",
                                "Make the test pass on the unmodified code first; kernelsmith only proposes "
                                "changes that keep a passing test passing.")
            archive = Archive()
            archive.add(baseline)
            _record(out, baseline)

            tuner = LaunchTuner(baseline.source)
            log.info("tuner knobs: %s", [k.key for k in tuner.knobs])
            progress.search_started(opts.budget)

            def evaluate(candidate: Candidate) -> Evaluation:
                return evaluator.evaluate(candidate.source, secrets.randbits(62))

            def on_result(candidate: Candidate) -> None:
                _record(out, candidate)
                best = archive.best()
                progress.candidate_done(candidate, best.fitness if best else None, archive.failures)

            summary = evolve(archive, tuner, evaluate, opts.budget, rng, on_result)
            best = archive.best()
            search = {"budget": opts.budget, "evaluated": summary.evaluated, "failures": summary.failures,
                      "duplicates_rejected": summary.duplicates_rejected, "exhausted": summary.exhausted,
                      "best_fitness": best.fitness if best else None, "seed": seed,
                      "knobs": [k.key for k in tuner.knobs]}

            champion, shown, repo_test, notes = None, baseline.evaluation, None, []
            if backend == "interpret":
                verdict = "not_timed"
                reason = ("The Triton CPU interpreter (`--backend interpret`) runs kernels as numpy on the host, "
                          "so its times say nothing about GPU speed; this run checked correctness only. Run with "
                          "`--backend triton` on a GPU to search for speed.")
            elif best is None or best.id == 0 or (best.fitness or 0) < opts.min_speedup:
                verdict = "no_improvement"
                shown = best.evaluation if best else baseline.evaluation
                reason = (f"No candidate beat the baseline by the required {opts.min_speedup:.2f}x "
                          f"(best: {best.fitness:.3f}x)." if best else "No candidate could be timed.")
            else:
                progress.stage("verifying the champion")
                check, failure, repo_test = _verify(evaluator, best, spec, opts.min_speedup, opts.trials,
                                                    target, kernel, backend)
                shown = check if check and check.cases else best.evaluation
                if failure:
                    verdict, reason = "no_improvement", f"A candidate looked faster, but {failure}"
                else:
                    verdict, reason, champion = "improved", "", best

        changes = tuner.describe(champion.genome) if champion else []
        if champion:
            module_name = Path(spec.module).name
            (out / "champion").mkdir(exist_ok=True)
            (out / "champion" / module_name).write_text(champion.source)
            diff = difflib.unified_diff(baseline.source.splitlines(True), champion.source.splitlines(True),
                                        f"a/{target.repo_path(spec.module)}", f"b/{target.repo_path(spec.module)}")
            (out / "champion.diff").write_text("".join(diff))
        report = build_report(
            spec=spec, backend=backend, verdict=verdict, reason=reason, shown=shown, champion=champion,
            changes=changes, archive=archive, search=search, repo_test=repo_test,
            baseline_repo_test=dataclasses.asdict(before), trials=opts.trials,
            held_out_cases=len(spec.held_out) if champion else 0,
            target={"root": str(target.root), "commit": target.commit, "module": spec.module, "test": kernel.test,
                    "branch": target.branch},
            reproduce=_reproduce_command(opts, backend, seed), notes=notes, min_speedup=opts.min_speedup)
        report["run"] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "seed": seed}
        applied = None
        if opts.apply and champion:
            first = f"kernelsmith: {opts.kernel} {report['champion']['geomean_speedup']:.2f}x faster on {backend}"
            applied = apply_champion(target, branch, spec.module, champion.source,
                                     first + "\n\n" + "\n".join(f"- {c}" for c in changes) + "\n")
            report["applied"] = {"branch": branch, "commit": applied}
            log.info("applied on branch %s as %s", branch, applied)
        elif opts.apply:
            report["notes"].append("--apply did nothing: there is no verified improvement to commit.")
        write_report(out, report)
        log.info("verdict: %s %s", verdict, reason)
        return OptimizeResult(verdict=verdict, report=report, out=out, applied_commit=applied)
    finally:
        log.removeHandler(handler)
        handler.close()
