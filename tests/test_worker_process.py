"""The worker process as the judge drives it: stopped while the oracle is timed, and running again after."""
import time
from pathlib import Path

from runners.backends import get_backend
from runners.processes import WorkerProcess


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_for(pid: int, states: str) -> str:
    for _ in range(100):
        state = _state(pid)
        if state in states:
            return state
        time.sleep(0.02)
    return _state(pid)


def test_a_paused_worker_is_stopped_and_resumes(tmp_path):
    worker = WorkerProcess(get_backend("interpret"), tmp_path, "candidate", None, None)
    try:
        worker.wait_ready(120)
        worker.pause()
        assert _wait_for(worker.proc.pid, "T") == "T"  # stopped: it can neither run nor queue device work
        worker.resume()
        assert _wait_for(worker.proc.pid, "SR") in "SR"
        worker.deadline = time.monotonic() + 60
        assert worker.request("host_overhead").get("ok") is False  # it answers again (no timer prepared)
    finally:
        worker.close()
    assert not worker.alive()


def test_the_configs_env_reaches_a_worker_without_secrets_or_overrides(tmp_path):
    from runners.processes import scrubbed_env

    extra = {"TARGET_FLAG": "7", "GITHUB_TOKEN": "x", "OPENAI_API_KEY": "y", "KS_REQUIRE_ISOLATION": "0",
             "PYTHONPATH": "/elsewhere", "TRITON_INTERPRET": "0"}
    env = scrubbed_env("interpret", extra)
    assert env["TARGET_FLAG"] == "7" and env["TRITON_INTERPRET"] == "1"  # the backend's settings win
    assert not {"GITHUB_TOKEN", "OPENAI_API_KEY", "KS_REQUIRE_ISOLATION"} & set(env)
    assert env["PYTHONPATH"] != "/elsewhere"
    worker = WorkerProcess(get_backend("interpret"), tmp_path, "oracle", None, None, {"TARGET_FLAG": "7"})
    try:
        worker.wait_ready(120)
        seen = Path(f"/proc/{worker.proc.pid}/environ").read_bytes().split(b"\0")
        assert b"TARGET_FLAG=7" in seen
    finally:
        worker.close()


def test_a_worker_that_ended_leaves_no_child_of_its_group_running(tmp_path):
    """The worker's leader ended and a child it started stays in its group: closing the worker ends the child too
    (it was signalled only while the leader lived)."""
    import subprocess

    worker = WorkerProcess.__new__(WorkerProcess)
    worker.uid = None
    worker.proc = subprocess.Popen(["sh", "-c", "sleep 120 & echo $!"], stdout=subprocess.PIPE, text=True,
                                   start_new_session=True)
    child = int(worker.proc.stdout.readline())
    worker.proc.wait()
    worker.proc.stdout.close()
    # a child just started may be in D for a moment (paging in under a loaded host): wait for it to run or sleep
    assert _wait_for(child, "SR") in "SR" and worker.proc.poll() is not None
    worker.pause()
    assert _wait_for(child, "T") == "T"  # stopped with the group though its leader is gone
    worker.kill()
    for _ in range(100):  # dead: a zombie until init reaps it, then gone
        try:
            if _state(child) in "ZX":
                break
        except FileNotFoundError:
            break
        time.sleep(0.02)
    else:
        raise AssertionError(f"the child {child} of an ended worker still runs")
