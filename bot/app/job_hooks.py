"""The App's side of a job: the checkout before it, the status comment during it, publishing after it."""
from __future__ import annotations

import shutil

from bot.jobs.dispatch import Prepared, RetryLater
from bot.jobs.models import Job

from .comment_commands import PIPELINE_BACKEND
from .context import AppContext
from .outcomes import classify
from .publish import Publisher, checkout_dir
from .status_comments import StatusReporter


class AppJobHooks:
    def __init__(self, ctx: AppContext):
        self.ctx = ctx
        self.reporter = StatusReporter(ctx)
        self.publisher = Publisher(ctx)

    def prepare(self, job: Job) -> Prepared:
        try:
            token = self.ctx.github.token_for(job.repo, job.installation_id)
            checkout = self.ctx.git.clone(job.repo, token, checkout_dir(self.ctx, job.id), job.commit)
        except Exception as exc:
            refusal = classify(exc, job.attempts)
            if refusal and refusal.retry_at:
                raise RetryLater(refusal.message, refusal.retry_at) from exc
            raise
        out = checkout.parent / "out"
        if out.exists():  # an earlier attempt, cut short by a restart
            shutil.rmtree(out)
        return Prepared(target=checkout, out=out, backend=PIPELINE_BACKEND.get(job.backend, job.backend))

    def progress(self, job: Job) -> None:
        self.reporter.update(job)

    def publish(self, job: Job) -> None:
        self.reporter.update(job)
        self.publisher.publish(job)

    def finished(self, job: Job) -> None:
        self.reporter.update(job, force=True)
        shutil.rmtree(checkout_dir(self.ctx, job.id), ignore_errors=True)
