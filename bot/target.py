"""The target checkout: a git repository (or a folder inside one) holding the kernels and their tests."""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import git

from .errors import UserError


@dataclass
class Target:
    root: Path  # the folder given on the command line (holds .github/kernelsmith.yml)
    repo: git.Repo
    prefix: PurePosixPath  # root relative to the repository's top level ('.' when they are the same)
    tests: Any = field(default=None)  # bot.repo_tests.TestSettings, set once the config is read
    baseline_test: Any = field(default=None)  # bot.repo_tests.TestRun of the capture run at HEAD, if any

    @property
    def commit(self) -> str:
        return self.repo.head.commit.hexsha

    @property
    def branch(self) -> str | None:
        return None if self.repo.head.is_detached else self.repo.active_branch.name

    def repo_path(self, rel: str) -> str:
        """A path relative to ``root`` as a path relative to the repository's top level."""
        return str(self.prefix / rel) if str(self.prefix) != "." else rel


def open_target(path: Path) -> Target:
    root = Path(path).resolve()
    if not root.is_dir():
        raise UserError(f"target {path} does not exist or is not a directory",
                        "Pass the path of a checkout of the repository whose kernels should be optimised.")
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UserError(f"target {path} is not inside a git repository",
                        "kernelsmith verifies and applies changes through git; run `git init && git add -A && "
                        "git commit -m initial` there first.") from None
    if not repo.head.is_valid():
        raise UserError(f"the git repository at {repo.working_tree_dir} has no commits",
                        "Commit the kernels and their tests first (`git add -A && git commit`).")
    prefix = PurePosixPath(root.relative_to(Path(repo.working_tree_dir).resolve()).as_posix())
    return Target(root=root, repo=repo, prefix=prefix)


def ensure_committed(target: Target, paths: list[str]) -> None:
    """The files the run reads must match HEAD: verification and --apply work from the commit."""
    repo_paths = [target.repo_path(p) for p in paths]
    dirty = target.repo.git.status("--porcelain", "--", *repo_paths).strip()
    if dirty:
        names = ", ".join(line.split(maxsplit=1)[-1] for line in dirty.splitlines())
        raise UserError(f"uncommitted changes to {names}",
                        "kernelsmith evaluates, tests and applies against the committed version; commit or "
                        "stash those changes and run again.")


def resolve_python(root: Path, value: str | None, where: str) -> str | None:
    """The interpreter named by `python:` as an absolute path (None: kernelsmith's own).

    ``value`` is a path relative to the repository root or absolute, a virtual environment's folder, or a
    command on PATH (``python3.11``)."""
    if not value:
        return None
    path = Path(value).expanduser()
    path = path if path.is_absolute() else Path(root) / path
    if path.is_dir():
        path = next((p for p in (path / "bin" / "python", path / "Scripts" / "python.exe") if p.is_file()), path)
    if path.is_file():
        return str(path.absolute())
    found = shutil.which(value) if "/" not in value else None
    if found:
        return found
    raise UserError(f"`python: {value}` in {where} is neither an interpreter, a virtual environment's folder, "
                    f"nor a command on PATH (looked for {path})",
                    "Point `python:` at the target's interpreter, e.g. `.venv/bin/python` (relative to the "
                    "repository root) or an absolute path, or remove it to use kernelsmith's own Python.")
