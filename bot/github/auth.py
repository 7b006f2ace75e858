"""GitHub App credentials: the App's JWT and per-installation tokens, refreshed before they expire.

The private key and the tokens live only in these objects: their repr hides them, they are never logged,
and no worker process receives them.
"""
from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from github import Auth, GithubIntegration

REFRESH_MARGIN = dt.timedelta(minutes=5)  # a token with less than this left is replaced before use


@dataclass(frozen=True)
class AppCredentials:
    app_id: int
    private_key: str = field(repr=False)

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id}, private_key=<hidden>)"


@dataclass
class InstallationToken:
    token: str = field(repr=False)
    expires_at: dt.datetime

    def fresh(self, at: dt.datetime) -> bool:
        return self.expires_at - at > REFRESH_MARGIN


def _utc(t: dt.datetime) -> dt.datetime:
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


class AppAuthority:
    """Mints installation tokens for the App, caching each until shortly before it expires."""

    def __init__(self, creds: AppCredentials, base_url: str, *, throttle: bool = True):
        self.creds, self.base_url = creds, base_url.rstrip("/")
        self._throttle = throttle
        self._tokens: dict[int, InstallationToken] = {}
        self._installations: dict[str, int] = {}
        self._lock = threading.Lock()
        self.minted = 0  # how many tokens were fetched (a test checks refresh before expiry)

    def __repr__(self) -> str:
        return f"AppAuthority(app_id={self.creds.app_id}, base_url={self.base_url!r})"

    def integration(self) -> GithubIntegration:
        kw = {} if self._throttle else {"seconds_between_requests": 0, "seconds_between_writes": 0}
        return GithubIntegration(auth=Auth.AppAuth(self.creds.app_id, self.creds.private_key),
                                 base_url=self.base_url, retry=None, **kw)

    def installation_id(self, repo: str) -> int:
        with self._lock:
            if repo in self._installations:
                return self._installations[repo]
        owner, name = repo.split("/", 1)
        inst = self.integration().get_repo_installation(owner, name).id
        with self._lock:
            self._installations[repo] = inst
        return inst

    def forget(self, installation_id: int | None = None, repos: Iterable[str] = ()) -> None:
        """Drop what is cached for an installation the App lost (its token, its repositories) and for
        repositories removed from an installation, so that a later installation is looked up afresh."""
        with self._lock:
            if installation_id is not None:
                self._tokens.pop(installation_id, None)
                for repo in [r for r, i in self._installations.items() if i == installation_id]:
                    del self._installations[repo]
            for repo in repos:
                self._installations.pop(repo, None)

    def token(self, installation_id: int, now: dt.datetime | None = None) -> str:
        now = now or dt.datetime.now(dt.timezone.utc)
        with self._lock:
            cached = self._tokens.get(installation_id)
            if cached and cached.fresh(now):
                return cached.token
        access = self.integration().get_access_token(installation_id)
        tok = InstallationToken(access.token, _utc(access.expires_at))
        with self._lock:
            self._tokens[installation_id] = tok
            self.minted += 1
        return tok.token
