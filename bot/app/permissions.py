"""Who may do what: write permission or more (collaborator permission API) starts and cancels work; bots
are never answered (two bots answering each other would never stop)."""
from __future__ import annotations

from bot.github.client import RepoClient

from .payloads import Account

WRITE = {"admin", "maintain", "write"}


def is_bot(account: Account) -> bool:
    return account.type == "Bot" or account.login.lower().endswith("[bot]")


def permission(repo: RepoClient, login: str) -> str:
    return repo.permission(login) or "none"


def may_write(level: str) -> bool:
    return level in WRITE
