"""`pull_request`: what became of a pull request kernelsmith opened (merged, closed unmerged, reopened) is noted
on the jobs that published it, so their pages and `/kernelsmith status` tell the story. Every other pull
request, and every other action, needs nothing from the App."""
from __future__ import annotations

from .commands import shown
from .context import AppContext
from .ignored import Ignored
from .payloads import PullRequestEvent, parse
from .publish import BRANCH_PREFIX

FOLLOWED = ("closed", "reopened")


def handle_pull_request(ctx: AppContext, payload: dict, delivery: str = "") -> str:
    ev = parse(PullRequestEvent, payload, "pull_request")
    pr, repo = ev.pull_request, ev.repository.full_name
    if ev.action not in FOLLOWED:
        raise Ignored(f"pull_request {shown(str(ev.action))}: nothing to do")
    same_repo = pr.head.repo is not None and pr.head.repo.full_name == repo
    if not (pr.head.ref.startswith(BRANCH_PREFIX) and same_repo):
        raise Ignored(f"pull_request {ev.action}: #{pr.number} is not a kernelsmith pull request")
    jobs = ctx.store.jobs_with_pull(repo, pr.number)
    if not jobs:
        raise Ignored(f"pull_request {ev.action}: no kernelsmith job published #{pr.number}")
    who = (pr.merged_by if pr.merged else ev.sender) or ev.sender
    by = f" by {who.login}" if who else ""
    what = {"reopened": "reopened", "closed": "merged" if pr.merged else "closed without merging"}[ev.action]
    note = f"pull request #{pr.number} {what}{by}"
    for job in jobs:
        if not (job.reason or "").endswith(note):  # a redelivery notes nothing twice
            ctx.store.update(job.id, reason=f"{job.reason}; {note}" if job.reason else note)
    return f"{note}: noted on job(s) {[j.id for j in jobs]}"
