"""The REST calls the bot makes, on one repository, as its App installation (PyGithub over HTTP).

PyGithub's own retry (which sleeps until a rate limit resets) is off: a refusal reaches the caller as a
`github.GithubException`, and `bot.app.outcomes` decides what it means (retry later, or a clear failure).
"""
from __future__ import annotations

from dataclasses import dataclass

from github import Auth, Github, GithubException, UnknownObjectException

from .auth import AppAuthority


@dataclass
class PullInfo:
    number: int
    url: str
    head: str
    draft: bool


class RepoClient:
    def __init__(self, gh: Github, full_name: str):
        self.gh, self.full_name = gh, full_name
        self.repo = gh.get_repo(full_name)  # lazy: the Github object is made with lazy=True

    # comments and reactions
    def permission(self, login: str) -> str:
        return self.repo.get_collaborator_permission(login)

    def react(self, issue_number: int, comment_id: int, content: str = "eyes") -> None:
        self.repo.get_issue(issue_number).get_comment(comment_id).create_reaction(content)

    def comment(self, issue_number: int, body: str) -> tuple[int, str]:
        c = self.repo.get_issue(issue_number).create_comment(body)
        return c.id, c.html_url

    def edit_comment(self, issue_number: int, comment_id: int, body: str) -> None:
        self.repo.get_issue(issue_number).get_comment(comment_id).edit(body)

    def commit_comment(self, sha: str, body: str) -> str:
        return self.repo.get_commit(sha).create_comment(body).html_url

    # contents
    def default_branch(self) -> str:
        return self.gh.get_repo(self.full_name).default_branch

    def branch_sha(self, branch: str) -> str:
        return self.repo.get_branch(branch).commit.sha

    def file_text(self, path: str, ref: str) -> str | None:
        try:
            return self.repo.get_contents(path, ref=ref).decoded_content.decode()
        except UnknownObjectException:
            return None

    # pull requests
    def open_pulls(self, head_prefix: str = "") -> list[PullInfo]:
        """The open pull requests whose head branch starts with `head_prefix`."""
        return [info for info in map(_info, self.repo.get_pulls(state="open")) if info.head.startswith(head_prefix)]

    def pull_for_branch(self, branch: str) -> PullInfo | None:
        owner = self.full_name.split("/")[0]
        return next((_info(p) for p in self.repo.get_pulls(state="open", head=f"{owner}:{branch}")), None)

    def create_pull(self, title: str, body: str, head: str, base: str, draft: bool, labels: list[str]) -> PullInfo:
        pr = self.repo.create_pull(title=title, body=body, head=head, base=base, draft=draft)
        if labels:
            pr.add_to_labels(*labels)
        return _info(pr)

    def update_pull(self, number: int, title: str, body: str) -> PullInfo:
        pr = self.repo.get_pull(number)
        pr.edit(title=title, body=body)
        return _info(pr)


def _info(pr) -> PullInfo:
    return PullInfo(number=pr.number, url=pr.html_url, head=pr.head.ref, draft=bool(getattr(pr, "draft", False)))


class GitHubClient:
    """Opens a `RepoClient` with a fresh-enough installation token for the repository."""

    def __init__(self, authority: AppAuthority, *, throttle: bool = True, timeout: int = 15):
        self.authority, self.throttle, self.timeout = authority, throttle, timeout

    def token_for(self, repo: str, installation_id: int | None) -> str:
        return self.authority.token(installation_id or self.authority.installation_id(repo))

    def repo(self, full_name: str, installation_id: int | None = None) -> RepoClient:
        token = self.token_for(full_name, installation_id)
        kw = {} if self.throttle else {"seconds_between_requests": 0, "seconds_between_writes": 0}
        gh = Github(auth=Auth.Token(token), base_url=self.authority.base_url, retry=None, timeout=self.timeout,
                    lazy=True, **kw)
        return RepoClient(gh, full_name)


__all__ = ["GitHubClient", "GithubException", "PullInfo", "RepoClient"]
