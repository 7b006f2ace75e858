"""The `kernelsmith` command line: a thin shell around bot.optimize with a progress bar."""
from __future__ import annotations

import faulthandler
import shutil
import signal
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape  # `kernel[grid](...)`, `test[dtype1-shape2]`: brackets in messages are text
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .errors import UserError

if hasattr(signal, "SIGUSR1"):  # `kill -USR1 <pid>` prints where a stuck run is (bench/real_repo_gpu.sh uses it)
    faulthandler.register(signal.SIGUSR1, all_threads=True)

app = typer.Typer(
    help="Find faster GPU kernels in a repository by evolutionary search, verify them, and propose them.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False)
console = Console(stderr=True, log_path=False)


class RichProgress:
    """Candidates evaluated, failures and the best speedup so far."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.task = None

    def stage(self, text: str, name: str = "") -> None:
        console.log(text)

    def search_started(self, budget: int) -> None:
        self.task = self.progress.add_task("searching", total=budget, failures=0, best="–")

    def candidate_done(self, candidate, best, failures) -> None:
        self.progress.update(self.task, advance=1, failures=failures,
                             best=f"{best:.3f}x" if best is not None else "not timed")


@app.command()
def optimize(
    target: Path = typer.Argument(..., help="Checkout of the target repository (holds .github/kernelsmith.yml)."),
    kernel: str = typer.Option(..., "--kernel", "-k", help="Kernel name from the target's .github/kernelsmith.yml."),
    budget: int = typer.Option(24, min=0, help="Candidates to evaluate (the baseline is not counted)."),
    out: Path = typer.Option(Path("runs/latest"), help="Folder for report.md, report.json, the champion and logs."),
    backend: str = typer.Option("auto", help="auto (GPU when present), triton (NVIDIA GPU), interpret (CPU, "
                                             "correctness only)."),
    apply: bool = typer.Option(False, "--apply", help="Commit a verified champion on branch "
                                                      "kernelsmith/<kernel>-<backend>; your branch is untouched."),
    seed: int = typer.Option(None, help="Seed of the search (correctness inputs always use fresh secret seeds)."),
    min_speedup: float = typer.Option(1.03, help="A champion must beat the baseline by this factor, re-timed."),
    trials: int = typer.Option(3, min=1, help="Fresh random inputs per case in correctness checks."),
    timeout: float = typer.Option(300.0, help="Seconds one candidate's evaluation may take before it is killed."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the files of an earlier run in --out."),
    models: Path = typer.Option(None, "--models", help="YAML file of LLMs and prices (API keys from the "
                                                       "environment); without it the launch-parameter tuner runs "
                                                       "alone, with no network."),
    preset: str = typer.Option(None, "--preset", help="kernel-smith: 40 rounds, temperature 0.6, top-p 0.95."),
    operators: str = typer.Option(None, "--operators", help="Comma-separated: tuner, rewrite, diff (default: "
                                                            "tuner, plus rewrite and diff with --models)."),
    rounds: int = typer.Option(None, "--rounds", min=1, help="Stop after this many rounds of proposals."),
    max_minutes: float = typer.Option(None, "--max-minutes", help="Stop the search after this much wall-clock."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Stop when the LLMs have used this many tokens."),
    max_dollars: float = typer.Option(None, "--max-dollars", help="Stop when the LLMs have cost this much (USD)."),
    stagnation: int = typer.Option(None, "--stagnation", help="Stop after this many evaluations without a "
                                                              "better best."),
) -> None:
    """Search for a faster version of one kernel, verify it, and write the pull-request report."""
    from .jobs.cli_job import run_as_job
    from .optimize import OptimizeOptions
    from .optimize import optimize as run

    opts = OptimizeOptions(target=target, kernel=kernel, out=out, budget=budget, backend=backend, apply=apply,
                           seed=seed, min_speedup=min_speedup, trials=trials, timeout=timeout, overwrite=overwrite,
                           models=models, preset=preset,
                           operators=[o.strip() for o in operators.split(",")] if operators else None,
                           limits={k: v for k, v in {"rounds": rounds, "tokens": max_tokens, "money": max_dollars,
                                                     "stagnation": stagnation,
                                                     "wall_s": max_minutes * 60 if max_minutes else None}.items()
                                   if v is not None} or None)
    from evolver.engine import check_options

    try:
        check_options(opts.models, opts.preset, opts.operators, opts.limits)
    except ValueError as exc:
        _fail(exc)
    try:
        with _progress_bar() as progress:
            result = run_as_job(opts, run, RichProgress(progress))  # the App's job, run locally
    except UserError as exc:
        _fail(exc)
    console.print(f"[bold]{result.verdict.replace('_', ' ')}[/]: {result.report['reason'] or 'see the report'}",
                  highlight=False, soft_wrap=True)
    if result.applied_commit:
        console.print(f"committed {result.applied_commit[:12]} on branch {result.report['applied']['branch']}")
    console.print(f"report: {result.out / 'report.md'}")


def _fail(exc: Exception) -> NoReturn:
    """Print a user-facing error and exit with status 2."""
    console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2) from None


def _progress_bar() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("failures {task.fields[failures]}"), TextColumn("best {task.fields[best]}"),
                    TimeElapsedColumn(), console=console)


@app.command("serve")
def serve(host: str = typer.Option("0.0.0.0", help="Address to listen on."),
          port: int = typer.Option(8000, help="Port to listen on.")) -> None:
    """Run the GitHub App: webhook, job queue, scheduled scans and job pages (docs/deploy.md).

    Needs KS_WEBHOOK_SECRET, KS_APP_ID and KS_PRIVATE_KEY (or KS_PRIVATE_KEY_PATH); everything else has a
    default (SQLite in ./kernelsmith-data, local dispatch)."""
    from .app.settings import from_env

    try:
        settings = from_env()
    except UserError as exc:
        _fail(exc)
    from .app.service import serve as run_service

    run_service(settings, host, port)


@app.command("kernels")
def list_kernels(target: Path = typer.Argument(..., help="Checkout of the target repository.")) -> None:
    """List the kernels named in the target's .github/kernelsmith.yml."""
    from .config import load_config

    try:
        config = load_config(target)
    except UserError as exc:
        _fail(exc)
    for name, k in config.kernels.items():
        typer.echo(f"{name}\t{k.path}:{k.entry}\ttest {k.test}\t{len(k.shapes)} shapes x {len(k.dtypes)} dtypes")



@app.command("resume")
def resume(run_dir: Path = typer.Argument(..., help="The --out folder of an interrupted optimize run.")) -> None:
    """Continue an interrupted run with the same random and bandit state (its run.sqlite). A run whose job record
    says it ended with a verdict has nothing left to do: its verdict and report are shown, nothing is run again."""
    from evolver.engine import load_job

    from .jobs.cli_job import finished_job, run_as_job

    try:
        job, store_copy = load_job(run_dir)
        finished = finished_job(run_dir)
    except (OSError, ValueError) as exc:
        _fail(exc)
    if finished is not None:
        shutil.rmtree(store_copy.parent, ignore_errors=True)  # load_job's copy, in a folder of its own
        console.print(f"this run already finished (stage {finished.stage}, {finished.state}); nothing left to resume",
                      highlight=False, soft_wrap=True)
        console.print(f"[bold]{finished.verdict.replace('_', ' ')}[/]: {finished.reason or 'see the report'}",
                      highlight=False, soft_wrap=True)
        console.print(f"report: {Path(run_dir) / 'report.md'}")
        return
    from .optimize import OptimizeOptions
    from .optimize import optimize as run

    opts = OptimizeOptions(**{**job, "overwrite": True, "resume_from": store_copy})
    try:
        with _progress_bar() as progress:
            result = run_as_job(opts, run, RichProgress(progress))  # recorded in <out>/job.db, as optimize
    except UserError as exc:
        _fail(exc)
    console.print(f"[bold]{result.verdict.replace('_', ' ')}[/]: {result.report['reason'] or 'see the report'}")
    console.print(f"report: {result.out / 'report.md'}")


@app.command("export-training-data")
def export_training_data(
    run_dirs: list[Path] = typer.Argument(..., help="Run folders (each holds run.sqlite)."),
    format: str = typer.Option("sft", "--format", help="sft (steps that stayed correct and beat their parent) "
                                                       "or rl (prompt, response, reward)."),
    out: Path = typer.Option(Path("training-data"), "--out", help="Folder for one JSONL file per task."),
) -> None:
    """Chat-format JSONL from the LLM steps of finished runs, deduplicated and split by task."""
    from evolver.export import export

    try:
        counts = export(run_dirs, format, out)
    except (OSError, ValueError) as exc:
        _fail(exc)
    for task, n in counts.items():
        typer.echo(f"{task}\t{n} records\t{out / (task + '.' + format + '.jsonl')}")


@app.command("kernelbench")
def kernelbench(
    tasks: list[Path] = typer.Argument(..., help="KernelBench task files (Model, get_inputs, get_init_inputs) "
                                                 "or folders of them (level1/, level2/, ...)."),
    models: Path = typer.Option(None, "--models", help="YAML file of LLMs and prices."),
    out: Path = typer.Option(Path("runs/kernelbench"), help="Folder for one run per task and summary.json."),
    backend: str = typer.Option("auto", help="auto, triton or interpret."),
    preset: str = typer.Option("kernel-smith", "--preset", help="Search protocol (kernel-smith: 40 rounds)."),
    budget: int = typer.Option(40, min=0, help="Evaluations per task."),
    seed: int = typer.Option(0, help="Seed of each task's search."),
) -> None:
    """Run KernelBench-format tasks with the same protocol; report correctness, fast_1 and AMSR per level."""
    from evolver.kernelbench import run_kernelbench

    from .optimize import resolve_backend

    try:
        summary = run_kernelbench(tasks, out, resolve_backend(backend), models, preset, budget, seed)
    except (OSError, ValueError) as exc:
        _fail(exc)
    for level, row in summary["levels"].items():
        typer.echo(f"{level}\ttasks {row['tasks']}\tcorrect {row['correctness_rate']:.2f}\t"
                   f"fast_1 {row['fast_1'] if row['fast_1'] is not None else 'not timed'}\t"
                   f"AMSR {row['amsr'] if row['amsr'] is not None else 'not timed'}")
    typer.echo(f"summary: {out / 'summary.json'}")


@app.command("scan")
def scan_repo(target: Path = typer.Argument(..., help="Checkout of the repository to read (nothing is imported).")
              ) -> None:
    """List the Triton kernels, the functions that launch them, the tests that reach them, and what is missing."""
    from .config import CONFIG_PATH, load_config
    from .scan import format_table, scan

    configured = {}
    if (target / CONFIG_PATH).is_file():
        try:
            configured = {n: (k.path, k.entry) for n, k in load_config(target).kernels.items()}
        except UserError as exc:
            console.print(f"[yellow]note:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    typer.echo(format_table(scan(target, configured)))


@app.command("init")
def init_config(
    target: Path = typer.Argument(..., help="Checkout of the repository."),
    out: Path = typer.Option(None, help="Where to write the proposal (default: <target>/.github/kernelsmith.yml)."),
    capture: bool = typer.Option(False, "--capture", help="Run each kernel's test once and take arguments, shapes, "
                                                          "dtypes and written arguments from the recorded calls."),
    backend: str = typer.Option("auto", help="For --capture: auto, triton (GPU) or interpret (CPU)."),
    python: str = typer.Option(None, help="For --capture: the target's interpreter (or virtual environment)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing file."),
    only: list[str] = typer.Option(None, "--only", help="Propose only these entry functions (repeatable)."),
) -> None:
    """Write a proposed .github/kernelsmith.yml for review: one entry per kernel entry that a test reaches."""
    from .config import CONFIG_PATH
    from .init_config import proposals, render

    dest = out or target / CONFIG_PATH
    if dest.exists() and not force:
        console.print(f"[bold red]error:[/] {dest} exists. Pass --force to replace it, or --out elsewhere.")
        raise typer.Exit(code=2)
    try:
        recorder = _init_capture(target, backend, python) if capture else None
        props = proposals(target, recorder, only or None)
    except UserError as exc:
        _fail(exc)
    if not props:
        console.print("no kernel entry is reached by a test; `kernelsmith scan` shows what is missing")
        raise typer.Exit(code=1)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(render(props, python))
    typer.echo(f"wrote {dest}: {len(props)} kernels ({', '.join(p.name for p in props)}); review it before committing")


def _init_capture(target: Path, backend: str, python: str | None):
    from runners.extract import import_root

    from .capture import INIT_CALLS, run_capture
    from .optimize import resolve_backend
    from .repo_tests import TestSettings
    from .target import open_target, resolve_python

    tgt = open_target(target)
    backend = resolve_backend(backend)
    interpreter = resolve_python(tgt.root, python, "--python")

    def record(row, test, dotted):
        tgt.tests = TestSettings(python=interpreter, import_roots=[import_root(tgt.root, row.entry_file)[0]])
        console.log(f"capture: {test} -> {row.entry}")
        capture = run_capture(tgt, test, dotted, row.entry_name, backend, stop_after=INIT_CALLS)
        return capture.calls, None if capture.calls else capture.why_none()

    return record


if __name__ == "__main__":
    app()
