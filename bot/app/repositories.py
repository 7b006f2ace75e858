"""`repository`: a repository the App knows that is renamed or transferred keeps its jobs, publications and
scans under the new name (else publishing would take its own branch for a stranger's); one deleted or archived
is scanned no more and its active jobs, which could never publish, are cancelled; unarchived, it is back."""
from __future__ import annotations

from .commands import shown
from .context import AppContext
from .ignored import Ignored
from .installations import cancel_jobs
from .payloads import RepositoryEvent, parse

MOVED, GONE = ("renamed", "transferred"), ("deleted", "archived")


def handle_repository(ctx: AppContext, payload: dict, delivery: str = "") -> str:
    ev = parse(RepositoryEvent, payload, "repository")
    name, action, store = ev.repository.full_name, ev.action, ctx.store
    if action in MOVED:
        old = ev.former_name
        if old is None:
            raise Ignored(f"repository {action}: the payload does not say the former name of {name}")
        if store.repository(old) is None:
            raise Ignored(f"repository {action}: {old} is not a repository kernelsmith knows")
        moved = store.rename_repository(old, name)
        ctx.github.authority.forget(repos=[old])
        return f"repository {action}: {old} is now {name} ({moved} job(s) moved)"
    if action in GONE or action == "unarchived":
        if store.repository(name) is None:
            raise Ignored(f"repository {action}: {name} is not a repository kernelsmith knows")
        active = action == "unarchived"
        store.upsert_repository(name, ev.installation_id, active)
        cancelled = [] if active else cancel_jobs(ctx, [name])
        return (f"repository {action}: {name} {'active' if active else 'inactive'}"
                + (f"; cancelled job(s) {cancelled}" if cancelled else ""))
    raise Ignored(f"repository {shown(str(action))}: nothing to do")
