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
    from runners.sandbox import copy_reference

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
