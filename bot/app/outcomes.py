"""What a refusal from GitHub means for the work in hand: try again later, or a clear, final outcome."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import requests
from github import GithubException, RateLimitExceededException

from bot.github.git_remote import GitError

MAX_WAIT = dt.timedelta(hours=1)


@dataclass
class Refusal:
    message: str
    retry_at: dt.datetime | None = None  # naive UTC; None: final


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def _header(headers: dict | None, name: str) -> str | None:
    for k, v in (headers or {}).items():
        if k.lower() == name:
            return v
    return None


def classify(exc: BaseException, attempt: int = 1) -> Refusal | None:
    """A Refusal for GitHub's and git's errors; None for anything else (a bug: the caller records it)."""
    if isinstance(exc, GithubException):
        status, data, headers = exc.status, exc.data if isinstance(exc.data, dict) else {}, exc.headers
        msg = data.get("message") or str(exc)
        remaining, reset = _header(headers, "x-ratelimit-remaining"), _header(headers, "x-ratelimit-reset")
        after = _header(headers, "retry-after")
        if isinstance(exc, RateLimitExceededException) or status == 429 or (status == 403 and remaining == "0"):
            wait = dt.timedelta(seconds=60)
            if after and after.isdigit():
                wait = dt.timedelta(seconds=int(after))
            elif reset and reset.isdigit():
                wait = dt.datetime.fromtimestamp(int(reset), dt.timezone.utc).replace(tzinfo=None) - _now()
            wait = min(max(wait, dt.timedelta(seconds=1)), MAX_WAIT)
            return Refusal(f"GitHub rate limit ({status} {msg}); retrying in {int(wait.total_seconds())} s",
                           _now() + wait)
        if status >= 500:
            wait = dt.timedelta(seconds=min(30 * attempt, 600))
            return Refusal(f"GitHub answered {status} ({msg}); retrying in {int(wait.total_seconds())} s",
                           _now() + wait)
        details = "; ".join(e.get("message") or f"{e.get('field')} {e.get('code')}"
                            for e in data.get("errors", []) if isinstance(e, dict))
        hint = {401: "GitHub refused the App's credentials",
                403: "GitHub refused (the App may lack a permission on this repository)",
                404: "GitHub does not know that object (deleted, or the App is not installed there)",
                422: "GitHub refused the request as invalid"}.get(status, "GitHub refused the request")
        return Refusal(f"{hint}: {status} {msg}" + (f" ({details})" if details else ""))
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        wait = dt.timedelta(seconds=min(30 * attempt, 600))
        return Refusal(f"GitHub could not be reached ({type(exc).__name__}); retrying", _now() + wait)
    if isinstance(exc, GitError):
        return Refusal(str(exc))
    return None
