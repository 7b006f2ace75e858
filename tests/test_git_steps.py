"""Repo tests in temporary worktrees and --apply, on real git repositories."""
import git
import pytest

from bot.apply import apply_champion, branch_name
from bot.errors import UserError
from bot.repo_tests import run_test_with_source
from bot.target import ensure_committed, open_target
from conftest import CHEATS, EXAMPLE, commit_all

MODULE = "tinyserve/kernels/rms_norm.py"
TEST = "tests/test_rms_norm.py"


def untouched(repo: git.Repo, head: str) -> None:
    assert repo.head.commit.hexsha == head and repo.active_branch.name == "main"
    assert not repo.is_dirty(untracked_files=True)
    assert len(repo.git.worktree("list").splitlines()) == 1


def test_repo_test_runs_in_a_worktree_with_and_without_the_change(example_repo):
    target = open_target(example_repo)
    head = target.commit
    before = run_test_with_source(target, MODULE, None, TEST, "interpret")
    assert before.passed and not before.with_champion and "passed" in before.output_tail
    honest = run_test_with_source(target, MODULE, (CHEATS / "honest_rewrite.py").read_text(), TEST, "interpret")
    assert honest.passed and honest.with_champion
    wrong = run_test_with_source(target, MODULE, (CHEATS / "wrong_result.py").read_text(), TEST, "interpret")
    assert not wrong.passed and "failed" in wrong.output_tail
    untouched(target.repo, head)


def test_apply_commits_on_a_new_branch_only(example_repo):
    target = open_target(example_repo)
    head = target.commit
    source = (CHEATS / "honest_rewrite.py").read_text()
    branch = branch_name("rms_norm", "triton")
    sha = apply_champion(target, branch, MODULE, source, "kernelsmith: rms_norm\n")
    untouched(target.repo, head)
    commit = target.repo.commit(branch)
    assert commit.hexsha == sha and commit.parents[0].hexsha == head
    assert list(commit.stats.files) == [MODULE]
    assert commit.tree[MODULE].data_stream.read().decode() == source
    with pytest.raises(UserError, match="already exists"):
        apply_champion(target, branch, MODULE, source, "again\n")


def test_target_inside_a_larger_repository(tmp_path):
    """examples/tinyserve inside the kernelsmith checkout: paths are mapped through the prefix."""
    import shutil
    repo = git.Repo.init(tmp_path / "outer", initial_branch="main")
    shutil.copytree(EXAMPLE, tmp_path / "outer/examples/tinyserve")
    commit_all(repo, "outer")
    target = open_target(tmp_path / "outer/examples/tinyserve")
    assert str(target.prefix) == "examples/tinyserve"
    assert target.repo_path(MODULE) == f"examples/tinyserve/{MODULE}"
    assert run_test_with_source(target, MODULE, None, TEST, "interpret").passed


def test_uncommitted_changes_are_refused(example_repo):
    target = open_target(example_repo)
    ensure_committed(target, [MODULE, TEST])
    (example_repo / MODULE).write_text("# local edit\n")
    with pytest.raises(UserError, match="uncommitted changes to tinyserve/kernels/rms_norm.py"):
        ensure_committed(target, [MODULE, TEST])


def test_not_a_repository_or_empty_repository(tmp_path):
    with pytest.raises(UserError, match="not inside a git repository"):
        open_target(tmp_path)
    git.Repo.init(tmp_path / "empty")
    with pytest.raises(UserError, match="has no commits"):
        open_target(tmp_path / "empty")
    with pytest.raises(UserError, match="does not exist"):
        open_target(tmp_path / "missing")
