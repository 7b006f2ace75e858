"""The spare worker imports the baseline's host modules while it waits (runners/preload.py): a candidate's
evaluation no longer pays for them. On the H200 that import was 8-12 s of every Liger-Kernel evaluation."""
import shutil
from pathlib import Path

from bot.config import load_config, task_spec
from runners.extract import build_bundle
import json
import os

import torch

from runners import preload
from runners.preload import host_imports
from runners.sandbox import Evaluator

SGLITE = Path(__file__).resolve().parent.parent / "examples" / "sglite"
SLOW_S = 3.0


def test_the_host_imports_are_the_absolute_top_level_ones():
    source = ("from __future__ import annotations\nimport torch\nimport a.b as ab\nfrom host.utils import f\n"
              "from .helpers import g\nfrom ks_candidate.x import y\ndef k():\n    import lazy\n")
    assert host_imports(source, own=("ks_candidate",)) == ["torch", "a.b", "host.utils"]
    assert host_imports("def broken(:\n") == []
    assert host_imports('"""doc"""\nimport torch\nimport sys\nsys.path.insert(0, "x")\nimport late\n') == ["torch", "sys"]


def test_a_gpu_worker_warms_its_device_before_it_is_ready(monkeypatch):
    """On a GPU the worker makes its context and starts the profiler once while it waits; where the device does
    not work, that is recorded for the worker's log and left for the probe and the first call to report."""
    job = json.loads(preload.encode([], [], False, "cuda"))
    assert job["device"] == "cuda" and json.loads(preload.encode([], ["x"], True))["device"] is None
    monkeypatch.setenv(preload.ENV, json.dumps(job))
    out = preload.run_from_env()
    assert preload.ENV not in os.environ
    if torch.cuda.is_available():
        assert out["device_warm_s"] > 0
    else:
        assert "device_warm_failed" in out and "device_warm_s" not in out


def test_a_slow_host_import_is_paid_while_the_worker_waits(tmp_path):
    repo = tmp_path / "sglite"
    shutil.copytree(SGLITE, repo, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    utils = repo / "python" / "sglite" / "srt" / "utils.py"
    utils.write_text(f"import time\ntime.sleep({SLOW_S})  # a host package that takes a while to import\n"
                     + utils.read_text())
    spec = task_spec("fused_add_rms_norm", load_config(repo).kernels["fused_add_rms_norm"], "interpret")
    bundle = tmp_path / "bundle"
    build_bundle(repo, spec, bundle)
    with Evaluator(bundle, "interpret", timeout=120, trials=1) as ev:
        assert any(m.startswith("sglite.") for m in host_imports(ev.baseline))
        first = ev.evaluate(ev.baseline, seed=1, time_it=False)
        second = ev.evaluate(ev.baseline.replace("num_warps", "num_warps", 1) + "\n# another candidate\n", seed=2,
                             time_it=False)
    assert first.ok and second.ok, (first.error, second.error)
    # without the preload each candidate's load imports the slow helper: at least SLOW_S seconds
    assert first.phases["load"] < SLOW_S / 2 and second.phases["load"] < SLOW_S / 2, (first.phases, second.phases)


def _state(pid: int, want: str | None = None) -> str:
    """The process's state letter; with ``want``, after up to a second for a signal to take effect."""
    import time

    for _ in range(100):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if want is None or (state == "T") == (want == "T"):
            return state
        time.sleep(0.01)
    return state


def test_the_spare_is_stopped_while_either_side_is_timed(tmp_path):
    """The spare may still be importing the next candidate's host modules; the judge stops it (and the candidate,
    while the oracle is timed) for every timed request, and lets it go on afterwards."""
    from runners.backends import get_backend
    from runners.judge import Judge
    from runners.processes import WorkerProcess

    backend = get_backend("interpret")
    workers = [WorkerProcess(backend, tmp_path, role) for role in ("oracle", "candidate", "candidate")]
    try:
        oracle, candidate, spare = workers
        judge = Judge.__new__(Judge)  # only its timing steps' pausing is used here
        judge.oracle, judge.candidate, judge.bystanders = oracle, candidate, [spare]
        with judge._alone(candidate):
            assert _state(spare.proc.pid, "T") == "T" and _state(candidate.proc.pid) != "T"
        assert _state(spare.proc.pid, "R") != "T"
        with judge._alone(oracle):
            assert _state(spare.proc.pid, "T") == "T" and _state(candidate.proc.pid, "T") == "T"
            assert _state(oracle.proc.pid) != "T"
        assert _state(spare.proc.pid, "R") != "T" and _state(candidate.proc.pid, "R") != "T"
    finally:
        for w in workers:
            w.close()
