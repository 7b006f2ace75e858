"""Publishing a verified kernel: branch `kernelsmith/<kernel>-<backend>` at the job's commit, pushed with a
lease, and one pull request per branch (updated, never duplicated). A branch whose tip kernelsmith did not
push is left alone, with a comment; the open-PR limit and labels and draft come from the repository's config.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from bot.apply import branch_name
from bot.jobs.models import Job
from bot.jobs.states import State

from . import rendering
from .context import AppContext
from .outcomes import classify
from .status_comments import render

if TYPE_CHECKING:
    from bot.config import Config

log = logging.getLogger("kernelsmith.publish")
BRANCH_PREFIX = "kernelsmith/"  # every branch `bot.apply.branch_name` names starts so


def checkout_dir(ctx: AppContext, job_id: int) -> Path:
    return ctx.settings.data_dir / "jobs" / str(job_id) / "checkout"


class Publisher:
    def __init__(self, ctx: AppContext):
        self.ctx = ctx

    def publish(self, job: Job) -> None:
        try:
            self._publish(job)
        except Exception as exc:
            refusal = classify(exc, job.attempts)
            if refusal is None:
                log.exception("publishing job %d", job.id)
                self.ctx.store.transition(job.id, State.failed, reason=f"publishing failed: {type(exc).__name__}: "
                                                                       f"{exc}; the report is kept")
            elif refusal.retry_at:
                self.ctx.store.update(job.id, next_attempt_at=refusal.retry_at, github_error=refusal.message)
            else:
                self.ctx.store.transition(job.id, State.failed, github_error=refusal.message,
                                          reason=f"publishing failed: {refusal.message}; the report is kept")

    def _config(self, job: Job, checkout: Path, gh) -> Config:
        from bot.config import CONFIG_PATH, parse_config

        path = checkout / CONFIG_PATH
        text = path.read_text() if path.is_file() else gh.file_text(CONFIG_PATH, job.commit)
        return parse_config(text or "", CONFIG_PATH)

    def _publish(self, job: Job) -> None:
        ctx, store = self.ctx, self.ctx.store
        out = Path(job.out_dir)
        report = json.loads((out / "report.json").read_text())
        gh = ctx.github.repo(job.repo, job.installation_id)
        token = ctx.github.token_for(job.repo, job.installation_id)
        checkout = ctx.git.clone(job.repo, token, checkout_dir(ctx, job.id), job.commit)
        config = self._config(job, checkout, gh)
        branch = branch_name(job.kernel, job.backend)
        existing = gh.pull_for_branch(branch)
        remote = ctx.git.remote_sha(job.repo, token, branch)
        pub = store.publication(job.repo, branch)
        if remote and (pub is None or pub.pushed_sha != remote):
            body = rendering.comment("human_push", job=job, branch=branch, remote_sha=remote, summary=render(ctx, job))
            target = existing.number if existing else job.issue_number
            if target:
                gh.comment(target, body)
            store.transition(job.id, State.done, pr_number=existing.number if existing else None,
                             pr_url=existing.url if existing else None, github_error=None,
                             reason=f"not pushed: {branch} has commits that kernelsmith did not push")
            return
        if existing is None:
            open_ks = gh.open_pulls(head_prefix=BRANCH_PREFIX)
            if len(open_ks) >= config.open_pull_requests_limit:
                if job.issue_number:
                    gh.comment(job.issue_number, rendering.comment(
                        "pr_limit", job=job, repo=job.repo, open=len(open_ks), limit=config.open_pull_requests_limit))
                store.transition(job.id, State.done, github_error=None,
                                 reason=f"not published: {len(open_ks)} open kernelsmith pull requests, the limit "
                                        f"is {config.open_pull_requests_limit}")
                return
        module = report["target"]["module"]
        champion = (out / "champion" / Path(module).name).read_text()
        speedup = (report.get("champion") or {}).get("geomean_speedup")
        title = f"kernelsmith: {job.kernel} " + (f"{speedup:.2f}x faster" if speedup else "verified") + \
                f" on {job.backend}"
        sha = ctx.git.commit_files(checkout, branch, {module: champion}, f"{title}\n\nkernelsmith job {job.id}")
        ctx.git.push(checkout, job.repo, token, branch, expected=remote)
        store.record_publication(job.repo, branch, sha, existing.number if existing else None)
        body = rendering.comment("pr_body", report=(out / "report.md").read_text(), job=job)
        if existing:
            pr = gh.update_pull(existing.number, title, body)
        else:
            base = (job.options or {}).get("base_branch") or gh.default_branch()
            pr = gh.create_pull(title, body, head=branch, base=base, draft=config.draft, labels=config.labels)
        store.record_publication(job.repo, branch, sha, pr.number)
        store.transition(job.id, State.done, pr_number=pr.number, pr_url=pr.url, github_error=None)
