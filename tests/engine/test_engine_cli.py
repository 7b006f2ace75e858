"""The engine through the command line, as a user runs it: `optimize --models` against the loopback LLM
server, `export-training-data` on its run folder, `resume` of a finished run, and `kernelbench`.

The optimize run is a real `python -m bot.cli` process (what reaches its files is checked: the API key must not);
the other commands run through the same Typer app in this process (CliRunner), which spares an interpreter and
a torch import per command and still goes through argument parsing, exit codes and the printed output."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from engine_fixtures import ROOT, SCRIPTS, RecordedLLM, models_file

from evolver.engine import load_job
from evolver.store import RunStore

KEY = "sk-cli-secret-0987654321"


def kernelsmith(*args):
    env = {**os.environ, "KS_TEST_LLM_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "bot.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env=env, check=False)


def kernelsmith_here(*args):
    """The command through the Typer app in this process: exit code, stdout and stderr as a process has them."""
    from typer.testing import CliRunner

    from bot.cli import app

    result = CliRunner().invoke(app, list(map(str, args)))
    crashed = result.exception if not isinstance(result.exception, SystemExit) else None
    assert crashed is None, f"{type(crashed).__name__}: {crashed}"  # an exit code, never a traceback
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


@pytest.mark.slow
def test_optimize_with_models_then_export_and_resume(example_repo, tmp_path):
    out = tmp_path / "run"
    with RecordedLLM(SCRIPTS / "softmax.json") as server:
        models = models_file(tmp_path, server.url)
        proc = kernelsmith("optimize", example_repo, "--kernel", "softmax", "--backend", "interpret", "--budget", 2,
                           "--models", models, "--operators", "rewrite", "--preset", "kernel-smith", "--seed", 1,
                           "--trials", 1, "--out", out)
        assert proc.returncode == 0, proc.stderr
        requests = list(server.requests)
    store = RunStore(out / "run.sqlite")
    rows = store.rows("evaluated")
    calls = store.call_rows()
    store.close()
    rewrites = [r for r in rows if r["operator"] == "rewrite"]
    assert len(rewrites) == 2 and any(r["correct"] for r in rewrites)  # a rewrite picked up and verified
    assert any("_softmax_partials_kernel" in r["source"] and r["correct"] for r in rewrites)
    assert calls and all(c["temperature"] == 0.6 and c["top_p"] == 0.95 for c in calls)
    assert all(r["body"]["temperature"] == 0.6 for r in requests)
    search = json.loads((out / "search.json").read_text())
    assert search["models"][0]["calls"] == len(calls) and search["stop"] == "evaluations"
    body = (out / "report.md").read_text()  # the PR body tells the LLM search
    assert f"In all {len(calls)} LLM calls" in body and "| `local-openai` |" in body
    for path in out.rglob("*"):  # the API key reached the server and nothing else
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path

    job, _ = load_job(out)
    assert job["kernel"] == "softmax" and job["operators"] == ["rewrite"] and job["budget"] == 2

    proc = kernelsmith_here("export-training-data", out, "--format", "rl", "--out", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in (tmp_path / "data" / "softmax.rl.jsonl").read_text().splitlines()]
    assert len(records) >= 2 and all({"prompt", "response", "reward"} <= set(r) for r in records)

    with RecordedLLM(SCRIPTS / "softmax.json") as server:  # resume a finished run: nothing left to evaluate
        proc = kernelsmith_here("resume", out)
        assert proc.returncode == 0, proc.stderr
        assert not server.requests
    message = " ".join(proc.stderr.split())
    assert "already finished" in message and "not timed" in message, message  # the recorded verdict
    store = RunStore(out / "run.sqlite")
    assert [r["id"] for r in store.rows("evaluated")] == [r["id"] for r in rows]
    store.close()
    assert len((out / "candidates.jsonl").read_text().splitlines()) == 1 + 2


def test_resume_and_export_refuse_folders_that_are_not_runs(tmp_path):
    proc = kernelsmith_here("resume", tmp_path)
    assert proc.returncode == 2 and "run.sqlite" in proc.stderr
    proc = kernelsmith_here("export-training-data", tmp_path, "--format", "sft")
    assert proc.returncode == 2 and "run.sqlite" in proc.stderr


def test_only_a_run_that_ended_with_a_verdict_counts_as_finished(tmp_path):
    """`kernelsmith resume` skips a run whose job record (<out>/job.db) ended with a verdict and whose report is
    written; a run that failed, was killed (no record) or has no report is resumed."""
    from bot.jobs.cli_job import JOB_FILE, finished_job
    from bot.jobs.states import State
    from bot.jobs.store import JobStore, sqlite_url

    def record(folder, state, report=True):
        folder.mkdir()
        store = JobStore(sqlite_url(folder / JOB_FILE))
        job, _ = store.create_job(repo="r", trigger="cli", kernel="k", backend="interpret", options={})
        store.update(job.id, state=state.value, stage="report",
                     verdict="no_improvement" if state is not State.failed else None)
        store.close()
        if report:
            (folder / "report.json").write_text("{}")
        return folder

    assert finished_job(record(tmp_path / "ended", State.no_gain)).verdict == "no_improvement"
    assert finished_job(record(tmp_path / "failed", State.failed)) is None
    assert finished_job(record(tmp_path / "no-report", State.no_gain, report=False)) is None
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / "report.json").write_text("{}")
    assert finished_job(tmp_path / "killed") is None


def test_kernelbench_tasks_report_correctness_per_level(tmp_path, monkeypatch):
    monkeypatch.setenv("KS_TEST_LLM_KEY", KEY)
    with RecordedLLM(SCRIPTS / "kernelbench_relu.json") as server:
        proc = kernelsmith_here("kernelbench", ROOT / "examples/kernelbench/level1/1_ReLU.py", "--models",
                           models_file(tmp_path, server.url), "--backend", "interpret", "--budget", 1,
                           "--out", tmp_path / "kb")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "kb" / "summary.json").read_text())
    level = summary["levels"]["level1"]
    assert level["tasks"] == 1 and level["correctness_rate"] == 1.0
    assert level["fast_1"] is None and level["amsr"] is None  # the interpreter times nothing
    assert "level1\ttasks 1\tcorrect 1.00" in proc.stdout


def test_bad_search_options_are_refused_before_any_work(example_repo, tmp_path):
    from typer.testing import CliRunner

    from bot.cli import app

    def run(*args):
        return CliRunner().invoke(app, ["optimize", str(example_repo), "--kernel", "softmax", *map(str, args)])

    result = run("--operators", "rewrite", "--out", tmp_path / "a")
    assert result.exit_code == 2 and "needs models" in result.output and not (tmp_path / "a").exists()
    result = run("--preset", "fast", "--out", tmp_path / "b")
    assert result.exit_code == 2 and "unknown preset" in result.output
    bad = tmp_path / "models.yaml"
    bad.write_text("models:\n  - {name: x, provider: gemini, model: y}\n")
    result = run("--models", bad, "--out", tmp_path / "c")
    assert result.exit_code == 2 and "provider must be anthropic or openai" in " ".join(result.output.split())
