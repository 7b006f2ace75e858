"""`kernelsmith optimize` end to end, as a user runs it: a subprocess on a real git checkout.

Refusals decided before any of the target's code runs (config, arguments, git state, --out) are checked
in-process through the same Typer app (same exit code, same stderr): as subprocesses they cost an
interpreter start and a torch import each (~4 s) and prove nothing more. Whatever runs the target's code
(a search, a kernel that does not compile, a failing test) still runs as a real `python -m bot.cli`."""
import json
import subprocess
import sys
from types import SimpleNamespace

import git
import pytest
import torch
from conftest import ROOT, commit_all
from typer.testing import CliRunner

from bot.cli import app

MODULE = "tinyserve/kernels/rms_norm.py"


def kernelsmith(*args, cwd=ROOT):
    proc = subprocess.run([sys.executable, "-m", "bot.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=600)
    proc.message = " ".join(proc.stderr.split())  # what the user reads, whatever the terminal width
    return proc


def kernelsmith_here(*args):
    """The same command line in this process: exit code, stdout and stderr as `kernelsmith` gives them."""
    result = CliRunner().invoke(app, list(map(str, args)))
    crashed = result.exception if not isinstance(result.exception, SystemExit) else None
    assert crashed is None, f"{type(crashed).__name__}: {crashed}"  # a refusal, never a traceback
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr,
                           message=" ".join(result.stderr.split()))


def snapshot(path):
    repo = git.Repo(path)
    return (repo.head.commit.hexsha, sorted(h.name for h in repo.heads), repo.git.status("--porcelain"),
            repo.git.worktree("list").count("\n"))


def test_help_reads_well():
    out = kernelsmith("--help").stdout + kernelsmith("optimize", "--help").stdout
    for words in ("optimize", "kernels", "--budget", "--backend", "--apply", "interpret"):
        assert words in out


def test_optimize_on_the_cpu_interpreter(example_repo, tmp_path):
    before = snapshot(example_repo)
    out = tmp_path / "run"
    proc = kernelsmith("optimize", example_repo, "--kernel", "rms_norm", "--budget", 2, "--out", out, "--seed", 1,
                       "--apply", "--trials", 1)  # one input set a case: correctness, not its statistics, is at stake
    assert proc.returncode == 0, proc.stderr
    assert "not timed" in proc.stderr and "2/2" in proc.stderr  # the progress bar's last state
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "not_timed" and report["champion"] is None
    assert report["search"]["evaluated"] == 2 and report["search"]["seed"] == 1
    assert report["correctness"]["baseline_repo_test"]["passed"] is True
    assert report["environment"]["backend"] == "interpret"
    assert any("--apply did nothing" in n for n in report["notes"])
    md = (out / "report.md").read_text()
    assert "No speed was measured" in md and "--seed 1" in md
    rows = (out / "candidates.jsonl").read_text().splitlines()
    assert len(rows) == 3 and json.loads(rows[0])["operator"] == "baseline"
    assert "verdict: not_timed" in (out / "run.log").read_text()
    assert (out / "bundle/task.yaml").is_file()
    assert snapshot(example_repo) == before  # no branch, no commit, no stray files


def _remove_config(repo_path):
    (repo_path / ".github/kernelsmith.yml").unlink()


def _break_config(repo_path):
    path = repo_path / ".github/kernelsmith.yml"
    path.write_text(path.read_text().replace("entry: rms_norm", "entry: rms_norm\n    budget: 3"))


def _break_kernel(repo_path):
    path = repo_path / MODULE
    path.write_text(path.read_text().replace("tl.rsqrt(", "tl.rsqrtt("))


def _break_test(repo_path):
    path = repo_path / "tests/test_rms_norm.py"
    path.write_text(path.read_text() + "\n\ndef test_already_broken():\n    assert 1 == 2\n")


@pytest.mark.parametrize("damage, args, cause, fix, run", [
    (_remove_config, [], "no .github/kernelsmith.yml", "Add one", kernelsmith_here),
    (_break_config, [], "line 6 (kernels.rms_norm.budget): Extra inputs", "Correct those entries", kernelsmith_here),
    (None, ["--kernel", "nope"], "kernel `nope` is not in", "rms_norm, silu_and_mul", kernelsmith_here),
    (_break_kernel, [], "does not compile or run", "Fix the kernel", kernelsmith),
    (_break_test, [], "test fails before any change", "Make the test pass", kernelsmith),
], ids=["missing-config", "invalid-config", "unknown-kernel", "kernel-does-not-compile", "test-fails-before"])
def test_bad_input_gets_one_clear_error(example_repo, tmp_path, damage, args, cause, fix, run):
    if damage:
        damage(example_repo)
        commit_all(git.Repo(example_repo), "damage")
    before = snapshot(example_repo)
    proc = run("optimize", example_repo, *(args or ["--kernel", "rms_norm"]), "--budget", 2, "--trials", 1,
               "--out", tmp_path / "run", "--apply")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "error:" in proc.message and cause in proc.message and fix in proc.message
    assert "Traceback" not in proc.stderr
    assert snapshot(example_repo) == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error under test needs a machine without a GPU")
def test_triton_backend_without_gpu(example_repo, tmp_path):
    proc = kernelsmith_here("optimize", example_repo, "--kernel", "rms_norm", "--backend", "triton",
                            "--out", tmp_path / "run")
    assert proc.returncode == 2
    assert "needs a CUDA GPU" in proc.message and "--backend interpret" in proc.message
    assert not (tmp_path / "run").exists()


def test_uncommitted_kernel_and_existing_output_are_refused(example_repo, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "report.json").write_text("{}")
    proc = kernelsmith_here("optimize", example_repo, "--kernel", "rms_norm", "--out", out)
    assert proc.returncode == 2 and "already holds files" in proc.message
    assert (out / "report.json").read_text() == "{}"  # nothing lost
    (example_repo / MODULE).write_text((example_repo / MODULE).read_text() + "\n# wip\n")
    proc = kernelsmith_here("optimize", example_repo, "--kernel", "rms_norm", "--out", tmp_path / "other")
    assert proc.returncode == 2 and "uncommitted changes" in proc.message


def test_target_must_be_a_git_checkout(tmp_path):
    proc = kernelsmith_here("optimize", tmp_path, "--kernel", "rms_norm", "--out", tmp_path / "run")
    assert proc.returncode == 2 and "not inside a git repository" in proc.message and "git init" in proc.message


def test_kernels_lists_the_config(monkeypatch):
    monkeypatch.chdir(ROOT)  # a path relative to where the user stands
    proc = kernelsmith_here("kernels", "examples/tinyserve")
    assert proc.returncode == 0
    names = [line.split("\t")[0] for line in proc.stdout.splitlines()]
    assert names == ["rms_norm", "silu_and_mul", "apply_rotary_pos_emb", "softmax", "layer_norm", "qk_rms_norm"]
    assert "tinyserve/kernels/rms_norm.py:rms_norm" in proc.stdout
    bad = kernelsmith_here("kernels", "tests")
    assert bad.returncode == 2 and "no .github/kernelsmith.yml" in bad.message


def test_output_folder_may_not_hold_the_target(example_repo):
    for out in (example_repo, example_repo.parent, example_repo / ".git" / "runs"):
        proc = kernelsmith_here("optimize", example_repo, "--kernel", "rms_norm", "--out", out, "--overwrite")
        assert proc.returncode == 2 and "would hold or overwrite the target checkout" in proc.message
    assert (example_repo / ".git").is_dir() and (example_repo / "tinyserve/kernels/rms_norm.py").is_file()
