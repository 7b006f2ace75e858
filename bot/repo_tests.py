"""Running the target repository's own tests in a temporary git worktree, with or without a new kernel."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from runners.sandbox import SECRET_NAME

from .target import Target


@dataclass
class TestRun:
    command: str
    passed: bool
    returncode: int
    duration_s: float
    output_tail: str
    with_champion: bool


@contextlib.contextmanager
def worktree(target: Target, commit: str | None = None) -> Iterator[Path]:
    """A detached worktree of ``commit`` (default HEAD) in a temporary folder; yields the target root in it.

    The user's checkout, branch and index are never touched; the worktree is removed on exit.
    """
    tmp = Path(tempfile.mkdtemp(prefix="ks-worktree-"))
    path = tmp / "wt"
    target.repo.git.worktree("add", "--detach", str(path), commit or target.commit)
    try:
        yield path / target.prefix
    finally:
        target.repo.git.worktree("remove", "--force", str(path))
        shutil.rmtree(tmp, ignore_errors=True)


def pytest_env(backend: str, root: Path) -> dict[str, str]:
    """The user's environment without credentials: the test runs code kernelsmith wrote."""
    env = {k: v for k, v in os.environ.items() if not SECRET_NAME.search(k)}
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if backend == "interpret":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def run_repo_test(root: Path, test: str, backend: str, timeout: float = 900.0,
                  with_champion: bool = False) -> TestRun:
    """``python -m pytest <test>`` in ``root``; the root goes first on sys.path so that the worktree's
    package is imported, not an installed copy."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test]
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=root, env=pytest_env(backend, root), capture_output=True, text=True,
                              timeout=timeout)
        code, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = -9, f"{exc.stdout or ''}\n(timed out after {timeout:.0f} s)"
    tail = "\n".join(output.strip().splitlines()[-15:])
    return TestRun(command=f"python -m pytest -q {test}", passed=code == 0, returncode=code,
                   duration_s=time.perf_counter() - started, output_tail=tail, with_champion=with_champion)


def run_test_with_source(target: Target, module: str, source: str | None, test: str, backend: str) -> TestRun:
    """The repo's test at HEAD, with ``module`` replaced by ``source`` (None: unchanged)."""
    with worktree(target) as root:
        if source is not None:
            (root / module).write_text(source)
        return run_repo_test(root, test, backend, with_champion=source is not None)
