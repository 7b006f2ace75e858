"""`push`: a push to the default branch that changes `.github/kernelsmith.yml` into an invalid file gets a
commit comment naming the line; a push to a kernelsmith branch by anyone else is noted (publishing then
finds a tip it did not push and stops force-pushing)."""
from __future__ import annotations

from bot.errors import UserError

from . import rendering
from .context import AppContext
from .ignored import Ignored
from .installations import installation_for
from .payloads import PushEvent, parse
from .permissions import is_bot
from .publish import BRANCH_PREFIX

LISTED_COMMITS = 20  # GitHub lists at most this many commits of a push


def handle_push(ctx: AppContext, payload: dict, delivery: str = "") -> str:
    from bot.config import CONFIG_PATH, parse_config

    ev = parse(PushEvent, payload, "push")
    ref, after, name = ev.ref, ev.after, ev.repository.full_name
    if ref.startswith(f"refs/heads/{BRANCH_PREFIX}"):
        sender = ev.sender
        who = "the bot" if sender and is_bot(sender) else sender.login if sender else "someone"
        raise Ignored(f"push to {ref} by {who}: publishing will not force-push over a tip it did not push")
    if ref != f"refs/heads/{ev.default_branch}":
        raise Ignored(f"push to {ref}: not the default branch")
    if ev.deleted:
        raise Ignored(f"push to {ref}: the branch was deleted")
    if ev.installation_id:  # a repository of the App's: scheduled scans visit it
        ctx.store.upsert_repository(name, ev.installation_id)
    commits = ev.commits + ([ev.head_commit] if ev.head_commit else [])
    if len(ev.commits) < LISTED_COMMITS and not any(c.touches(CONFIG_PATH) for c in commits):
        raise Ignored("push: the config did not change")
    inst = installation_for(ctx, name, ev.installation_id)
    gh = ctx.github.repo(name, inst)
    text = gh.file_text(CONFIG_PATH, after)
    if text is None:
        return "push: the config was removed"
    try:
        parse_config(text, CONFIG_PATH)
    except UserError as exc:
        gh.commit_comment(after, rendering.comment("config_error", sha=after, error=str(exc)))
        return f"push: invalid config, commented on {after[:7]}"
    return "push: the config is valid"
