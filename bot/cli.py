"""The `kernelsmith` command line: a thin shell around bot.optimize with a progress bar."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .errors import UserError

app = typer.Typer(
    help="Find faster GPU kernels in a repository by evolutionary search, verify them, and propose them.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False)
console = Console(stderr=True, log_path=False)


class RichProgress:
    """Candidates evaluated, failures and the best speedup so far."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.task = None

    def stage(self, text: str) -> None:
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
) -> None:
    """Search for a faster version of one kernel, verify it, and write the pull-request report."""
    from .optimize import OptimizeOptions
    from .optimize import optimize as run

    opts = OptimizeOptions(target=target, kernel=kernel, out=out, budget=budget, backend=backend, apply=apply,
                           seed=seed, min_speedup=min_speedup, trials=trials, timeout=timeout, overwrite=overwrite)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("failures {task.fields[failures]}"), TextColumn("best {task.fields[best]}"),
               TimeElapsedColumn()]
    try:
        with Progress(*columns, console=console) as progress:
            result = run(opts, RichProgress(progress))
    except UserError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from None
    console.print(f"[bold]{result.verdict.replace('_', ' ')}[/]: {result.report['reason'] or 'see the report'}",
                  highlight=False, soft_wrap=True)
    if result.applied_commit:
        console.print(f"committed {result.applied_commit[:12]} on branch {result.report['applied']['branch']}")
    console.print(f"report: {result.out / 'report.md'}")


@app.command("kernels")
def list_kernels(target: Path = typer.Argument(..., help="Checkout of the target repository.")) -> None:
    """List the kernels named in the target's .github/kernelsmith.yml."""
    from .config import load_config

    try:
        config = load_config(target)
    except UserError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from None
    for name, k in config.kernels.items():
        typer.echo(f"{name}\t{k.path}:{k.entry}\ttest {k.test}\t{len(k.shapes)} shapes x {len(k.dtypes)} dtypes")


if __name__ == "__main__":
    app()
