"""Where the App is installed: `installation` and `installation_repositories` keep the stored repositories (the
ones scheduled scans visit) in step with GitHub, and `installation_for` finds the installation of a repository
whose delivery names none."""
from __future__ import annotations

from github import GithubException

from .commands import shown
from .context import AppContext
from .ignored import Ignored
from .payloads import InstallationEvent, parse

GONE = ("deleted", "suspend")  # the App can no longer act on the installation's repositories


def installation_for(ctx: AppContext, repo: str, given: int | None) -> int:
    """The delivery's installation, or the one GitHub names for ``repo``; `Ignored` when the App is not
    installed there (nothing can be done or said on that repository)."""
    if given:
        return given
    try:
        return ctx.github.authority.installation_id(repo)
    except GithubException as exc:
        if exc.status == 404:
            raise Ignored(f"the App is not installed on {repo} (the delivery names no installation)") from None
        raise


def cancel_jobs(ctx: AppContext, repos: list[str]) -> list[int]:
    """Active jobs on repositories the App lost: they could never publish."""
    ids = [j.id for repo in repos for j in ctx.store.active_jobs(repo)]
    cancelled = [j.id for j in ctx.store.request_cancel(ids)] if ids else []
    if cancelled:
        ctx.wake_jobs()
    return cancelled


def handle_installation(ctx: AppContext, payload: dict, delivery: str = "") -> str:
    """`installation` (created, deleted, suspend, unsuspend) and `installation_repositories` (added, removed)."""
    ev = parse(InstallationEvent, payload, "installation")
    inst, action, store = ev.installation.id, ev.action, ctx.store
    if action in ("created", "added"):
        repos = [r.full_name for r in (ev.repositories or []) + (ev.repositories_added or [])]
        for name in repos:
            store.upsert_repository(name, inst, True)
        return f"installation {inst} {action}: {len(repos)} repositories active: {', '.join(repos) or 'none'}"
    if action == "removed":
        repos = [r.full_name for r in ev.repositories_removed or []]
        for name in repos:
            store.upsert_repository(name, inst, False)
        ctx.github.authority.forget(repos=repos)
        cancelled = cancel_jobs(ctx, repos)
        return (f"installation {inst} removed: {len(repos)} repositories inactive: {', '.join(repos) or 'none'}"
                + (f"; cancelled job(s) {cancelled}" if cancelled else ""))
    if action in GONE or action == "unsuspend":
        active = action == "unsuspend"
        listed = [r.full_name for r in ev.repositories or []]
        for name in listed:  # a deletion lists the repositories; those of an earlier event are found by id
            store.upsert_repository(name, inst, active)
        repos = sorted(set(listed) | set(store.set_installation_active(inst, active)))
        cancelled = []
        if not active:
            ctx.github.authority.forget(installation_id=inst, repos=repos)
            cancelled = cancel_jobs(ctx, repos)
        state = "active" if active else "inactive"
        return (f"installation {inst} {action}: {len(repos)} repositories {state}: {', '.join(repos) or 'none'}"
                + (f"; cancelled job(s) {cancelled}" if cancelled else ""))
    raise Ignored(f"installation action {shown(str(action))}: nothing to do")
