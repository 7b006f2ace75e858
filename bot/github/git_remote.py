"""git over the network for the App (through GitPython): clone at a commit, read a remote branch's tip, push
with a lease.

The installation token reaches git through GIT_ASKPASS and an environment variable of the git process
only: never in a URL, an argument list or a log line.
"""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import git

BOT_NAME = "kernelsmith[bot]"
BOT_EMAIL = "kernelsmith[bot]@users.noreply.github.com"

ASKPASS = """#!/bin/sh
case "$1" in
  Username*) echo x-access-token ;;
  *) printf '%s\\n' "$KS_GIT_TOKEN" ;;
esac
"""


class GitError(RuntimeError):
    pass


class GitRemote:
    def __init__(self, url_template: str, tool_dir: Path):
        """``url_template`` holds ``{repo}`` (owner/name): https://github.com/{repo}.git in production,
        file:///path/{repo}.git in tests."""
        self.url_template = url_template
        tool_dir.mkdir(parents=True, exist_ok=True)
        self.askpass = tool_dir / "git-askpass.sh"
        self.askpass.write_text(ASKPASS)
        self.askpass.chmod(stat.S_IRWXU)

    def url(self, repo: str) -> str:
        return self.url_template.format(repo=repo)

    def _git(self, args: list[str], token: str | None, cwd: Path | None = None) -> str:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        env.update(GIT_ASKPASS=str(self.askpass), GIT_TERMINAL_PROMPT="0", KS_GIT_TOKEN=token or "",
                   GIT_AUTHOR_NAME=BOT_NAME, GIT_AUTHOR_EMAIL=BOT_EMAIL, GIT_COMMITTER_NAME=BOT_NAME,
                   GIT_COMMITTER_EMAIL=BOT_EMAIL)
        status, out, err = git.Git(cwd).execute(["git", *args], env=env, with_extended_output=True,
                                                with_exceptions=False, kill_after_timeout=600)
        if status != 0:
            msg = (err or out).strip()
            if token:
                msg = msg.replace(token, "***")
            raise GitError(f"git {args[0]} failed: {msg[-500:]}")
        return out + ("\n" if out else "")

    def clone(self, repo: str, token: str | None, dest: Path, commit: str) -> Path:
        if not (dest / ".git").exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            self._git(["clone", "--quiet", "--no-checkout", self.url(repo), str(dest)], token)
        self._git(["checkout", "--quiet", "--detach", commit], token, cwd=dest)
        return dest

    def fetch(self, repo: str, token: str | None, dest: Path) -> None:
        self._git(["fetch", "--quiet", self.url(repo), "+refs/heads/*:refs/remotes/origin/*"], token, cwd=dest)

    def remote_sha(self, repo: str, token: str | None, branch: str) -> str | None:
        out = self._git(["ls-remote", self.url(repo), f"refs/heads/{branch}"], token)
        return out.split()[0] if out.strip() else None

    def head_branch(self, repo: str, token: str | None) -> tuple[str, str]:
        """The remote's default branch and its tip."""
        out = self._git(["ls-remote", "--symref", self.url(repo), "HEAD"], token)
        branch, sha = "main", ""
        for line in out.splitlines():
            if line.startswith("ref:"):
                branch = line.split()[1].removeprefix("refs/heads/")
            elif line.endswith("\tHEAD"):
                sha = line.split()[0]
        return branch, sha

    def commit_files(self, checkout: Path, branch: str, files: dict[str, str], message: str) -> str:
        """A new branch at the checked-out commit with ``files`` (repository path -> text) replaced."""
        self._git(["checkout", "--quiet", "-B", branch], None, cwd=checkout)
        for rel, text in files.items():
            (checkout / rel).write_text(text)
            self._git(["add", "--", rel], None, cwd=checkout)
        self._git(["commit", "--quiet", "-m", message], None, cwd=checkout)
        return self._git(["rev-parse", "HEAD"], None, cwd=checkout).strip()

    def push(self, checkout: Path, repo: str, token: str | None, branch: str, expected: str | None) -> None:
        """Push ``branch``; the remote must still be at ``expected`` (None: the branch must not exist)."""
        lease = f"--force-with-lease=refs/heads/{branch}:{expected or ''}"
        self._git(["push", "--quiet", lease, self.url(repo), f"HEAD:refs/heads/{branch}"], token, cwd=checkout)


def changed_files(checkout: Path, old: str, new: str) -> set[str]:
    proc = subprocess.run(["git", "diff", "--name-only", old, new], cwd=checkout, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise GitError(f"git diff failed: {proc.stderr.strip()[-300:]}")
    return set(proc.stdout.split())
