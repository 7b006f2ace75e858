"""Drive one job through its pipeline: progress goes to the store, the outcome becomes the job's final state.

The pipeline is `bot.optimize.optimize(OptimizeOptions, Progress)` (or any function of that shape, named as
``module:function``). The CLI runs it in-process (`run_in_process`); the service runs it in a scrubbed
subprocess (`bot.jobs.local_worker`, through `bot.jobs.dispatch.LocalDispatch`).
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from pathlib import Path

from .models import Job
from .states import State
from .store import JobStore

DEFAULT_PIPELINE = "bot.optimize:optimize"


class JobCancelled(Exception):
    pass


def load_pipeline(name: str) -> Callable:
    module, _, func = name.partition(":")
    return getattr(importlib.import_module(module), func or "optimize")


def options_for(kernel: str, options: dict, target: Path, out: Path, backend: str):
    """The pipeline's options from the job record (the CLI's options, or a command's budget and backend)."""
    from bot.optimize_options import OptimizeOptions

    fields = {f.name for f in dataclasses.fields(OptimizeOptions)}
    extra = {k: v for k, v in (options or {}).items() if k in fields and k not in ("target", "out", "kernel")}
    extra["backend"] = backend
    return OptimizeOptions(target=Path(target), kernel=kernel, out=Path(out), **extra)


class JobProgress:
    """A `bot.optimize.Progress` that records stages and counts on the job, then tells `inner` and `on_change`."""

    def __init__(self, store: JobStore, job_id: int, inner=None, on_change: Callable[[Job], None] | None = None):
        self.store, self.job_id, self.inner, self.on_change = store, job_id, inner, on_change
        self.done = 0

    def _changed(self, job: Job) -> None:
        if job.cancel_requested:
            raise JobCancelled(f"cancelled during stage {job.stage}")
        if self.on_change:
            self.on_change(job)

    def stage(self, text: str, name: str = "") -> None:
        job = self.store.enter_stage(self.job_id, name) if name else self.store.get(self.job_id)
        if self.inner:
            self.inner.stage(text, name)
        self._changed(job)

    def search_started(self, budget: int) -> None:
        self.store.enter_stage(self.job_id, "search")
        job = self.store.update(self.job_id, total_count=budget, done_count=0)
        if self.inner:
            self.inner.search_started(budget)
        self._changed(job)

    def candidate_done(self, candidate, best: float | None, failures: int) -> None:
        self.candidate_count(best, failures)
        if self.inner:
            self.inner.candidate_done(candidate, best, failures)

    def candidate_count(self, best: float | None, failures: int) -> None:
        self.done += 1
        job = self.store.update(self.job_id, done_count=self.done, best=best, failures=failures)
        self._changed(job)


def finish(store: JobStore, job_id: int, verdict: str, reason: str, out: Path, publish: bool) -> Job:
    """The pipeline returned: record the verdict; an improvement goes on to publishing when `publish`."""
    store.enter_stage(job_id, "report")
    fields = {"verdict": verdict, "out_dir": str(out)}
    if reason:  # an empty reason keeps what the job already says (e.g. that it was resumed after a restart)
        fields["reason"] = reason
    if verdict == "improved":
        return store.transition(job_id, State.publishing if publish else State.done, **fields)
    return store.transition(job_id, State.no_gain, **fields)


def fail(store: JobStore, job_id: int, reason: str) -> Job:
    job = store.get(job_id)
    if job.cancel_requested or job.state == State.cancelled.value:
        return store.transition(job_id, State.cancelled, reason=reason) if job.state != "cancelled" else job
    return store.transition(job_id, State.failed, reason=reason)


def run_in_process(store: JobStore, job_id: int, pipeline: Callable, opts, inner=None):
    """Claim the queued job, run the pipeline here on ``opts``, record the outcome. Exceptions reach the
    caller after the job records them (the CLI turns a UserError into exit code 2)."""
    from bot.errors import UserError

    store.transition(job_id, State.preparing, attempts=1)
    store.enter_stage(job_id, "preflight")
    progress = JobProgress(store, job_id, inner)
    try:
        result = pipeline(opts, progress)
    except UserError as exc:
        fail(store, job_id, str(exc))
        raise
    except BaseException as exc:
        fail(store, job_id, f"{type(exc).__name__}: {exc}")
        raise
    finish(store, job_id, result.verdict, result.report.get("reason") or "", result.out, publish=False)
    return result
