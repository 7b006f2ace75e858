"""`issue_comment` created: a `/kernelsmith` command from a person, answered on the same issue or pull request."""
from __future__ import annotations

import datetime as dt

from bot.errors import UserError
from bot.github.client import RepoClient
from bot.jobs.models import now

from . import rendering
from .commands import Command, find_command
from .context import AppContext
from .permissions import is_bot, may_write, permission

PIPELINE_BACKEND = {"nvidia": "triton", "interpret": "interpret"}


def handle_comment(ctx: AppContext, payload: dict) -> str:
    if payload.get("action") != "created":
        return f"comment {payload.get('action')}: nothing to do"
    comment, sender = payload["comment"], payload.get("sender") or payload["comment"]["user"]
    cmd = find_command(comment.get("body"))
    if cmd is None:
        return "no command in the comment"
    if is_bot(sender):
        return f"ignored: {sender.get('login')} is a bot"
    repo_name = payload["repository"]["full_name"]
    inst = (payload.get("installation") or {}).get("id")
    ctx.store.upsert_repository(repo_name, inst)
    number, login = payload["issue"]["number"], sender["login"]
    gh = ctx.github.repo(repo_name, inst)
    gh.react(number, comment["id"], "eyes")

    def reply(text: str) -> str:
        gh.comment(number, rendering.comment("reply", login=login, text=text))
        return text

    if cmd.verb == "unknown" or cmd.problem:
        gh.comment(number, rendering.comment("help", problem=f"@{login}: {cmd.problem}"))
        return f"answered: {cmd.problem}"
    if cmd.verb == "help":
        gh.comment(number, rendering.comment("help", problem=""))
        return "help"
    if cmd.verb == "status":
        gh.comment(number, rendering.comment("jobs", repo=repo_name, jobs=ctx.store.jobs(repo_name, limit=20)))
        return "status"
    level = permission(gh, login)
    if not may_write(level):
        gh.comment(number, rendering.comment("denied", login=login, repo=repo_name, permission=level,
                                             verb="start or cancel" if cmd.verb == "optimize" else "cancel"))
        return f"denied: {login} has {level} permission"
    if cmd.verb == "cancel":
        jobs = ctx.store.request_cancel([j.id for j in ctx.store.active_jobs(repo_name, number)])
        ctx.wake_jobs()
        return reply(f"cancelling {len(jobs)} job(s): {', '.join(str(j.id) for j in jobs) or 'none was running'}")
    return start_jobs(ctx, gh, payload, cmd, reply)


def start_jobs(ctx: AppContext, gh: RepoClient, payload: dict, cmd: Command, reply) -> str:
    # bot.config imports torch (through runners): only when a command needs it
    from bot.config import CONFIG_PATH, parse_config

    s = ctx.settings
    repo_name, comment = payload["repository"]["full_name"], payload["comment"]
    backend = cmd.backend or s.default_backend
    if backend not in PIPELINE_BACKEND:
        return reply(f"the `{backend}` backend is not available on this kernelsmith installation (local dispatch "
                     f"offers: {', '.join(PIPELINE_BACKEND)})")
    if backend == "nvidia" and s.gpus == [None]:
        return reply("this kernelsmith installation has no NVIDIA GPU; use `--backend interpret` for a "
                     "correctness-only dry run")
    budget = s.default_budget if cmd.budget is None else cmd.budget
    if budget > s.max_budget:
        return reply(f"--budget {budget} is over this installation's limit of {s.max_budget}")
    base = payload["repository"].get("default_branch") or gh.default_branch()
    sha = gh.branch_sha(base)
    text = gh.file_text(CONFIG_PATH, sha)
    if text is None:
        return reply(f"{repo_name} has no `{CONFIG_PATH}` on {base}; add one that names the kernels to optimise")
    try:
        config = parse_config(text, CONFIG_PATH)
    except UserError as exc:
        gh.comment(payload["issue"]["number"], rendering.comment("config_error", sha=sha, error=str(exc)))
        return f"invalid config: {exc}"
    kernels = cmd.kernels or list(config.kernels)
    unknown = [k for k in kernels if k not in config.kernels]
    if unknown:
        return reply(f"unknown kernel(s) {', '.join(f'`{k}`' for k in unknown)}; {CONFIG_PATH} lists: "
                     f"{', '.join(f'`{k}`' for k in config.kernels)}")
    mine = f"comment:{comment['id']}:"  # a retried delivery finishes its own jobs
    active = {(j.kernel, j.backend): j.id for j in ctx.store.active_jobs(repo_name)
              if not (j.source_key or "").startswith(mine)}
    busy = [k for k in kernels if (k, backend) in active]
    if busy:
        reply("already queued or running: " + ", ".join(f"`{k}` on `{backend}` (job {active[(k, backend)]})"
                                                         for k in busy))
        kernels = [k for k in kernels if k not in busy]
        if not kernels:
            return f"already running: {busy}"
    recent = ctx.store.jobs_created_since(repo_name, now() - dt.timedelta(hours=1))
    if recent + len(kernels) > s.jobs_per_hour:
        return reply(f"{repo_name} has started {recent} job(s) in the last hour; the limit is {s.jobs_per_hour} "
                     "an hour. Try again later.")
    started = []
    for kernel in kernels:
        job, _ = ctx.store.create_job(
            source_key=f"comment:{comment['id']}:{kernel}", repo=repo_name,
            installation_id=(payload.get("installation") or {}).get("id"), trigger="comment", kernel=kernel,
            backend=backend, options={"budget": budget, "base_branch": base}, commit=sha,
            issue_number=payload["issue"]["number"], comment_id=comment["id"], comment_url=comment.get("html_url"),
            requested_by=payload["sender"]["login"])
        if job.status_comment_id is None:
            from .status_comments import render

            cid, _ = gh.comment(job.issue_number, render(ctx, job))
            ctx.store.update(job.id, status_comment_id=cid)
        started.append(job.id)
    ctx.wake_jobs()
    return f"queued job(s) {started}"
