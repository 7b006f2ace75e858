"""`issue_comment` created: a `/kernelsmith` command from a person, answered on the same issue or pull request.

Only new comments are read (an edit or a deletion is ignored, with the reason), never a bot's (kernelsmith's own
least of all: two bots answering each other would never stop), and each once: the first delivery of a comment
claims it, and the same comment under another delivery id is ignored. Every command ends in a reply or a job,
never in silence: a malformed one gets the help text with the problem named.
"""
from __future__ import annotations

import datetime as dt

from github import UnknownObjectException

from bot.errors import UserError
from bot.github.client import RepoClient
from bot.jobs.models import now

from . import rendering
from .commands import Command, find_command, shown
from .context import AppContext
from .ignored import Ignored
from .installations import installation_for
from .payloads import Comment, CommentEvent, Malformed, parse
from .permissions import is_bot, may_write, permission

PIPELINE_BACKEND = {"nvidia": "triton", "interpret": "interpret"}
MARKER = "<!-- kernelsmith:"  # the first line of kernelsmith's own status comments
NOT_CREATED = {
    "edited": "comment edited: commands are read from new comments only (post the command as a new comment)",
    "deleted": "comment deleted: nothing to do",
}


def own_comment(ctx: AppContext, comment: Comment) -> bool:
    app = comment.performed_via_github_app
    return bool(app and app.id == ctx.settings.app_id) or (comment.body or "").lstrip().startswith(MARKER)


def handle_comment(ctx: AppContext, payload: dict, delivery: str = "") -> str:
    ev = parse(CommentEvent, payload, "issue_comment")
    if ev.action != "created":
        raise Ignored(NOT_CREATED.get(ev.action or "", f"comment action {shown(str(ev.action))}: nothing to do"))
    if own_comment(ctx, ev.comment):
        raise Ignored("ignored: the comment is kernelsmith's own")
    author = ev.author
    if author is None:
        raise Malformed("malformed issue_comment payload: neither sender nor comment.user says who wrote it")
    bot = next((a for a in (author, ev.comment.user) if a and is_bot(a)), None)
    if bot:
        raise Ignored(f"ignored: {bot.login} is a bot")
    cmd = find_command(ev.comment.body)
    if cmd is None:
        raise Ignored("no command in the comment")
    repo_name, number, login = ev.repository.full_name, ev.issue.number, author.login
    inst = installation_for(ctx, repo_name, ev.installation_id)
    holder = ctx.store.claim_comment(ev.comment.id, delivery) if delivery else None
    if holder:
        raise Ignored(f"comment {ev.comment.id} was acted on already, by delivery {holder} (a replay)")
    ctx.store.upsert_repository(repo_name, inst)
    gh = ctx.github.repo(repo_name, inst)
    gh.react(number, ev.comment.id, "eyes")

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
    return start_jobs(ctx, gh, ev, inst, cmd, reply)


def _config_names(asked: list[str], known: list[str]) -> tuple[list[str], list[str]]:
    """The config's names for the kernels asked for (a different case is forgiven where it is unambiguous), and
    the names that match none."""
    found, unknown = [], []
    for name in asked:
        same = [k for k in known if k.lower() == name.lower()]
        match = name if name in known else (same[0] if len(same) == 1 else None)
        if match is None:
            unknown.append(name)
        elif match not in found:
            found.append(match)
    return found, unknown


def start_jobs(ctx: AppContext, gh: RepoClient, ev: CommentEvent, inst: int, cmd: Command, reply) -> str:
    # bot.config imports torch (through runners): only when a command needs it
    from bot.config import CONFIG_PATH, parse_config

    s = ctx.settings
    repo_name, comment, number = ev.repository.full_name, ev.comment, ev.issue.number
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
    base = ev.repository.default_branch or gh.default_branch()
    try:
        sha = gh.branch_sha(base)
    except UnknownObjectException:
        return reply(f"{repo_name} has no branch `{shown(base)}` to work on (an empty repository?)")
    text = gh.file_text(CONFIG_PATH, sha)
    if text is None:
        return reply(f"{repo_name} has no `{CONFIG_PATH}` on {base}; add one that names the kernels to optimise")
    try:
        config = parse_config(text, CONFIG_PATH)
    except UserError as exc:
        gh.comment(number, rendering.comment("config_error", sha=sha, error=str(exc)))
        return f"invalid config: {exc}"
    kernels, unknown = _config_names(cmd.kernels, list(config.kernels)) if cmd.kernels else (list(config.kernels), [])
    if unknown:
        return reply(f"unknown kernel(s) {', '.join(f'`{shown(k)}`' for k in unknown)}; {CONFIG_PATH} lists: "
                     f"{', '.join(f'`{k}`' for k in config.kernels)}")
    mine = f"comment:{comment.id}:"  # this comment's jobs: a retried or redelivered delivery makes no twin
    ours = {j.kernel: j.id for j in ctx.store.jobs(repo_name) if (j.source_key or "").startswith(mine)}
    active = {(j.kernel, j.backend): j.id for j in ctx.store.active_jobs(repo_name)
              if not (j.source_key or "").startswith(mine)}
    busy = [k for k in kernels if (k, backend) in active]
    if busy:
        reply("already queued or running: " + ", ".join(f"`{k}` on `{backend}` (job {active[(k, backend)]})"
                                                         for k in busy))
        kernels = [k for k in kernels if k not in busy]
        if not kernels:
            return f"already running: {busy}"
    new = [k for k in kernels if k not in ours]
    recent = ctx.store.jobs_created_since(repo_name, now() - dt.timedelta(hours=1))
    if new and recent + len(new) > s.jobs_per_hour:
        return reply(f"{repo_name} has started {recent} job(s) in the last hour; the limit is {s.jobs_per_hour} "
                     "an hour. Try again later.")
    started, earlier = [], []
    for kernel in kernels:
        job, created = ctx.store.create_job(
            source_key=f"{mine}{kernel}", repo=repo_name, installation_id=inst, trigger="comment", kernel=kernel,
            backend=backend, options={"budget": budget, "base_branch": base}, commit=sha, issue_number=number,
            comment_id=comment.id, comment_url=comment.html_url, requested_by=ev.author.login)
        fresh = created or job.status_comment_id is None  # made now, or by an attempt cut short before its comment
        if job.status_comment_id is None:
            from .status_comments import render

            cid, _ = gh.comment(job.issue_number, render(ctx, job))
            ctx.store.update(job.id, status_comment_id=cid)
        (started if fresh else earlier).append(job.id)
    ctx.wake_jobs()
    if not earlier:
        return f"queued job(s) {started}"
    said = f"job(s) {earlier} already started by an earlier attempt of this delivery"
    return f"queued job(s) {started}; {said}" if started else said
