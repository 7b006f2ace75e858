"""Committing a verified champion on its own branch, leaving the user's branch and working tree untouched."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import git

from .errors import UserError
from .target import Target


def branch_name(kernel: str, backend: str) -> str:
    return f"kernelsmith/{kernel}-{backend}"


def ensure_branch_free(target: Target, branch: str) -> None:
    if branch in [h.name for h in target.repo.heads]:
        raise UserError(f"branch {branch} already exists in {target.repo.working_tree_dir}",
                        f"Delete it (`git branch -D {branch}`) or run without --apply.")


def apply_champion(target: Target, branch: str, module: str, source: str, message: str) -> str:
    """Create ``branch`` at HEAD with one commit replacing ``module``; returns the commit sha."""
    ensure_branch_free(target, branch)
    tmp = Path(tempfile.mkdtemp(prefix="ks-apply-"))
    path = tmp / "wt"
    target.repo.git.worktree("add", "-b", branch, str(path), target.commit)
    try:
        wt = git.Repo(path)
        rel = target.repo_path(module)
        (path / rel).write_text(source)
        wt.index.add([rel])
        return wt.index.commit(message).hexsha
    finally:
        target.repo.git.worktree("remove", "--force", str(path))
        shutil.rmtree(tmp, ignore_errors=True)
