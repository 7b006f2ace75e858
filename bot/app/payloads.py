"""Typed views of the webhook payloads the App acts on: only the fields the handlers read, checked once.

GitHub sends far more than this, and other senders (a proxy, a replayed or hand-made delivery) may send
less. A payload that lacks a field a handler needs, or holds one of the wrong type, is `Malformed`: the
delivery is recorded as ignored with the field named, never as a crash. Optional fields (a comment's body,
the sender, the installation, the organization) may be missing or null.
"""
from __future__ import annotations

from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .ignored import Ignored

Id = Annotated[int, Field(ge=1, le=2**63 - 1)]  # GitHub's ids and numbers; a database integer holds them
FULL_NAME = r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$"
SHA = r"^[0-9a-f]{40}$"


class Malformed(Ignored):
    """The payload lacks a field the App needs, or holds one of the wrong type."""


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Account(_View):
    login: str = Field(max_length=100)
    type: str | None = None


class App(_View):
    id: int | None = None
    slug: str | None = None


class Repo(_View):
    full_name: str = Field(pattern=FULL_NAME)
    default_branch: str | None = Field(default=None, max_length=255)
    master_branch: str | None = Field(default=None, max_length=255)


class Installation(_View):
    id: Id


class _Event(_View):
    action: str | None = None
    sender: Account | None = None
    installation: Installation | None = None

    @property
    def installation_id(self) -> int | None:
        return self.installation.id if self.installation else None


class Comment(_View):
    id: Id
    body: str | None = None
    user: Account | None = None
    html_url: str | None = None
    performed_via_github_app: App | None = None


class Issue(_View):
    number: Id
    pull_request: dict | None = None  # present when the issue is a pull request


class CommentEvent(_Event):
    comment: Comment
    issue: Issue
    repository: Repo

    @property
    def author(self) -> Account | None:
        """Who wrote the comment: for `created`, GitHub's sender; failing that, the comment's user."""
        return self.sender or self.comment.user


class PushCommit(_View):
    added: list[str] | None = None
    modified: list[str] | None = None

    def touches(self, path: str) -> bool:
        return path in (self.added or []) + (self.modified or [])


class PushEvent(_Event):
    ref: str = Field(max_length=500)
    after: str = Field(pattern=SHA)
    deleted: bool = False
    commits: list[PushCommit] = Field(default_factory=list)
    head_commit: PushCommit | None = None
    repository: Repo

    @property
    def default_branch(self) -> str:
        return self.repository.default_branch or self.repository.master_branch or "main"


class RepoName(_View):
    full_name: str = Field(pattern=FULL_NAME)


class InstallationEvent(_Event):
    installation: Installation
    repositories: list[RepoName] | None = None
    repositories_added: list[RepoName] | None = None
    repositories_removed: list[RepoName] | None = None


class Branch(_View):
    ref: str = Field(max_length=500)
    repo: RepoName | None = None  # null when the fork was deleted


class PullRequest(_View):
    number: Id
    head: Branch
    merged: bool | None = None
    merged_by: Account | None = None
    html_url: str | None = None


class PullRequestEvent(_Event):
    pull_request: PullRequest
    repository: Repo


class Renamed(_View):
    name: str = Field(alias="from", max_length=100)


class NameChange(_View):
    name: Renamed | None = None


class OwnerFrom(_View):
    user: Account | None = None
    organization: Account | None = None


class OwnerChange(_View):
    previous: OwnerFrom = Field(alias="from")


class RepoChanges(_View):
    repository: NameChange | None = None
    owner: OwnerChange | None = None


class RepositoryEvent(_Event):
    repository: Repo
    changes: RepoChanges | None = None

    @property
    def former_name(self) -> str | None:
        """The repository's full name before a `renamed` or `transferred`, when the payload says."""
        owner, name = self.repository.full_name.split("/")
        changes = self.changes or RepoChanges()
        if self.action == "renamed" and changes.repository and changes.repository.name:
            return f"{owner}/{changes.repository.name.name}"
        if self.action == "transferred" and changes.owner:
            was = changes.owner.previous.user or changes.owner.previous.organization
            return f"{was.login}/{name}" if was else None
        return None


V = TypeVar("V", bound=_View)


def parse(view: type[V], payload: object, event: str) -> V:
    """The payload as `view`; `Malformed` naming every field that is missing or of the wrong type."""
    if not isinstance(payload, dict):
        raise Malformed(f"malformed {event} payload: a JSON object was expected, not {type(payload).__name__}")
    try:
        return view.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors()[:5])
        raise Malformed(f"malformed {event} payload: {problems}") from None
