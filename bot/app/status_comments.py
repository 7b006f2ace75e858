"""The one status comment per job, edited in place as the job moves; its last edit carries the result."""
from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

from bot.jobs.models import Job

from . import rendering
from .context import AppContext
from .outcomes import classify

log = logging.getLogger("kernelsmith.status")

RESULT = {"improved": "a faster kernel was found and verified",
          "no_improvement": "no verified improvement",
          "not_timed": "correctness only: the CPU interpreter measures no speed"}


def result_line(job: Job) -> str:
    line = RESULT.get(job.verdict or "", job.verdict or "")
    report = _report(job)
    champion = (report or {}).get("champion") or {}
    if champion.get("geomean_speedup"):
        line += f" ({champion['geomean_speedup']:.3f}x geometric mean)"
    if job.reason:
        line += f". {job.reason}"
    return line


def _report(job: Job) -> dict | None:
    try:
        return json.loads((Path(job.out_dir) / "report.json").read_text()) if job.out_dir else None
    except (OSError, ValueError):
        return None


def render(ctx: AppContext, job: Job) -> str:
    summary = ""
    url = ctx.job_url(job.id)
    if url:
        summary = f"Details: {url}"
    return rendering.comment("status", job=job, result_line=result_line(job), summary=summary)


class StatusReporter:
    def __init__(self, ctx: AppContext):
        self.ctx = ctx
        self._last: dict[int, tuple[str, float, str]] = {}  # job id -> (state, time, body)
        self._lock = threading.Lock()

    def update(self, job: Job, force: bool = False) -> None:
        if not job.status_comment_id or not job.issue_number:
            return
        with self._lock:
            state, at, last_body = self._last.get(job.id, ("", 0.0, ""))
        if not force and state == job.state and time.monotonic() - at < self.ctx.settings.status_interval:
            return  # throttled: no need to render (which reads the report) a body that would not be sent
        body = render(self.ctx, job)
        with self._lock:
            if body == last_body:
                return
            self._last[job.id] = (job.state, time.monotonic(), body)
        try:
            self.ctx.github.repo(job.repo, job.installation_id).edit_comment(job.issue_number,
                                                                            job.status_comment_id, body)
        except Exception as exc:  # the job goes on; the refusal is kept on the job and shown on its page
            refusal = classify(exc)
            if refusal is None:
                raise
            log.warning("status comment of job %d: %s", job.id, refusal.message)
            self.ctx.store.update(job.id, github_error=refusal.message)
            with self._lock:
                self._last.pop(job.id, None)
