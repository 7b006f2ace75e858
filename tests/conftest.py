"""Shared fixtures. Triton runs through its CPU interpreter here unless a GPU is present."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import git
import pytest
import torch

if not torch.cuda.is_available():  # read when @triton.jit runs: set before any kernel module is imported
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "tinyserve"
CHEATS = Path(__file__).resolve().parent / "cheats"
AUTHOR = git.Actor("kernelsmith tests", "tests@localhost")


# Host-clock tests (the judge's timed stand-ins: speedups claimed, credited, corroborated) must not share the cores
# with another test. Under pytest-xdist (-n 2) a test of these files holds an exclusive lock and every other test a
# shared one, so the other worker waits between two of its tests while a timed test runs; in one process: no lock.
TIMED_FILES = ("test_judge_attacks", "test_anti_cheat.py", "test_protocols.py", "test_gpu")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # setup (module fixtures too), call and teardown: all under the lock
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run or os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") == "1":
        yield
        return
    import fcntl
    import tempfile

    exclusive = item.path.name.startswith(TIMED_FILES)
    base = Path(tempfile.gettempdir()) / f"kernelsmith-pytest-{run}"
    with open(f"{base}.turn", "a") as turn, open(f"{base}.lock", "a") as lock:
        fcntl.flock(turn, fcntl.LOCK_EX)  # a turnstile: a timed test waiting for its lock lets no new test start
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        fcntl.flock(turn, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def commit_all(repo: git.Repo, message: str) -> str:
    repo.git.add(A=True)
    return repo.index.commit(message, author=AUTHOR, committer=AUTHOR).hexsha


@pytest.fixture
def example_repo(tmp_path) -> Path:
    """A fresh git checkout of the example target repository, on branch main."""
    dest = tmp_path / "tinyserve"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    repo = git.Repo.init(dest, initial_branch="main")
    commit_all(repo, "baseline")
    return dest


@pytest.fixture(scope="session")
def rms_bundle(tmp_path_factory) -> Path:
    """The rms_norm task bundle for the interpreter, built from the example repository."""
    from bot.config import load_config, task_spec
    from runners.extract import build_bundle
    from runners.extract import copy_reference

    config = load_config(EXAMPLE)
    spec = task_spec("rms_norm", config.kernels["rms_norm"], "interpret")
    bundle = tmp_path_factory.mktemp("bundle")
    build_bundle(EXAMPLE, spec, bundle)
    copy_reference(EXAMPLE, bundle, spec.reference)
    return bundle


@pytest.fixture(scope="session")
def rms_evaluator(rms_bundle):
    from runners.sandbox import Evaluator

    with Evaluator(rms_bundle, "interpret", timeout=120, trials=2) as evaluator:
        yield evaluator


def run_past_the_policy(evaluator, source, time_it=False):
    """Evaluate a cheat as if it had slipped past the static policy: the judge must hold on its own."""
    return evaluator.evaluate(source, seed=5, time_it=time_it, trials=2, static_policy=False)
