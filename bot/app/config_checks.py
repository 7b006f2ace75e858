"""`push`: a push to the default branch that changes `.github/kernelsmith.yml` into an invalid file gets a
commit comment naming the line; a push to a kernelsmith branch by anyone else is noted (publishing then
finds a tip it did not push and stops force-pushing)."""
from __future__ import annotations

from bot.errors import UserError

from . import rendering
from .context import AppContext
from .permissions import is_bot
from .publish import BRANCH_PREFIX


def handle_push(ctx: AppContext, payload: dict) -> str:
    from bot.config import CONFIG_PATH, parse_config

    repo = payload["repository"]
    ref, after = payload.get("ref", ""), payload.get("after", "")
    default = repo.get("default_branch") or repo.get("master_branch") or "main"
    inst = (payload.get("installation") or {}).get("id")
    if ref.startswith(f"refs/heads/{BRANCH_PREFIX}"):
        who = (payload.get("sender") or {}).get("login")
        return f"push to {ref} by {'the bot' if is_bot(payload.get('sender') or {}) else who}"
    if ref != f"refs/heads/{default}" or payload.get("deleted"):
        return f"push to {ref}: not the default branch"
    ctx.store.upsert_repository(repo["full_name"], inst)
    touched = any(CONFIG_PATH in (c.get("added", []) + c.get("modified", [])) for c in payload.get("commits", []))
    if not touched:
        return "push: the config did not change"
    gh = ctx.github.repo(repo["full_name"], inst)
    text = gh.file_text(CONFIG_PATH, after)
    if text is None:
        return "push: the config was removed"
    try:
        parse_config(text, CONFIG_PATH)
    except UserError as exc:
        gh.commit_comment(after, rendering.comment("config_error", sha=after, error=str(exc)))
        return f"push: invalid config, commented on {after[:7]}"
    return "push: the config is valid"
