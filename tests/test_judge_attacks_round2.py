"""Attacks on the three-role judge, second round, through the real Evaluator on the CPU (tests/cheats/).

As in tests/test_judge_attacks.py: every cheat runs past the static policy (the judge must hold on its own);
attacks that the judge lets through today are `xfail(strict=True)` with the mechanism in the reason, and pass
once it is fixed. Timing attacks run against a judge of their own in a subprocess, on the timed CPU stand-in
of tests/test_judge_attacks.py (host clock instead of CUDA events, direct calls instead of graph replay; every
judge step is the real one).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml
from conftest import CHEATS, ROOT
from test_judge_attacks import _JUDGE, _own_judge

from runners.wire import shm_root


def _source(name: str) -> str:
    """A cheat's source; the destructive ones are committed inert and armed here (see their docstrings)."""
    return (CHEATS / name).read_text().replace("@ARMED@", "armed")


_TIMED = ["derives_window_seed.py", "negative_sample_times.py", "recovers_the_secret.py"]


@pytest.fixture(scope="module")
def timed_round2(rms_bundle, tmp_path_factory) -> dict:
    """The timing attacks of this round, one after the other, against one judge on the timed stand-in."""
    results = _own_judge(rms_bundle, tmp_path_factory.mktemp("timed2"), [_source(c) for c in _TIMED], timed=True)
    return dict(zip(_TIMED, results))


def _no_credit_for_an_unseen_pass(ev: dict) -> bool:
    """Refused at timing, or the judge's clock saw the candidate's pass at every case it resolved (a precomputed
    pass shows as a judge's time of almost nothing: judge_ratio ~0) and credited no speedup where it could not
    resolve the size (no ratio: 1.0x at most; on a loaded host the stand-in's clock leaves a case unresolved, which
    failed this test in full runs with nothing credited: the bundle has one case, so "resolved somewhere" cannot be
    asked of it); the stand-in's clock is too noisy to bound the credit itself."""
    if not ev["ok"]:
        return ev["stage"] == "timing"
    pairs = list(zip(ev["speedups"], ev["judge_ratios"]))
    return bool(pairs) and all((r > 0.1) if r is not None else (s is not None and s <= 1.0) for s, r in pairs)


def test_the_window_seed_cannot_be_derived_from_the_warm_up(timed_round2):
    ev = timed_round2["derives_window_seed.py"]
    assert _no_credit_for_an_unseen_pass(ev), (ev["stage"], ev["speedups"], ev["judge_ratios"], ev["messages"])


def test_negative_sample_times_are_refused(timed_round2):
    ev = timed_round2["negative_sample_times.py"]
    assert not ev["ok"] and ev["stage"] == "timing", ev


def test_the_secret_cannot_be_recovered_from_a_seed(timed_round2):
    ev = timed_round2["recovers_the_secret.py"]
    assert _no_credit_for_an_unseen_pass(ev), (ev["stage"], ev["speedups"], ev["judge_ratios"], ev["messages"])


@pytest.fixture(scope="module")
def prefill_bundle(rms_bundle, tmp_path_factory):
    """The rms_norm bundle with a first case of 16 rows of 4096: a prefill-like size, small for the interpreter."""
    bundle = tmp_path_factory.mktemp("prefill") / "bundle"
    shutil.copytree(rms_bundle, bundle)
    task = yaml.safe_load((bundle / "task.yaml").read_text())
    task["cases"][0]["symbols"] = {"T": 16, "H": 4096}
    (bundle / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return bundle


@pytest.mark.slow
def test_the_window_commitments_cannot_be_steered(prefill_bundle, tmp_path):
    """(Was a hole: the commitment was the plain byte sum of a slot's outputs; the worker normalised one row in 16
    in the timed pass, committed to 16x their byte sum, and at reveal moved low bytes by a few ulps to hit it: a
    fake 1.67x.) The commitment is now a keyed tree hash of the slot's bytes (runners/timing.py): outputs computed
    after the clock cannot be steered to match it."""
    [ev] = _own_judge(prefill_bundle, tmp_path, [_source("forges_window_commitments.py")], timed=True)
    assert not ev["ok"] and ev["stage"] == "timing" and "not the ones committed to" in ev["error"], ev


# ---- the oracle's folder and the judge's parser ---------------------------------------------------------------

def test_the_oracles_outputs_cannot_be_caught_in_its_outbox(rms_evaluator):
    ev = rms_evaluator.evaluate(_source("plants_files_in_the_oracle_outbox.py"), seed=5, time_it=False, trials=2,
                                static_policy=False)
    assert not ev.ok and ev.stage == "correctness" and "out of tolerance" in ev.error, (ev.stage, ev.error)


@pytest.fixture(scope="module")
def nested(rms_evaluator):
    """The deeply nested reply, evaluated once for both tests below (the evaluation, or the exception it raised)."""
    try:
        return rms_evaluator.evaluate(_source("deeply_nested_reply.py"), seed=5, time_it=False, trials=2,
                                      static_policy=False)
    except RecursionError as exc:
        return exc


def test_a_deeply_nested_reply_is_a_protocol_error(nested):
    assert not isinstance(nested, RecursionError), "the judge raised RecursionError out of Evaluator.evaluate"
    assert nested.stage == "crashed" and "broke the protocol" in nested.error, (nested.stage, nested.error)


def test_the_evaluator_works_after_a_deeply_nested_reply(rms_evaluator, nested):
    # the nested reply has run (and a RecursionError, the hole above, is not this test's business): what matters
    # here is the next evaluation
    again = rms_evaluator.evaluate(rms_evaluator.baseline, seed=6, time_it=False, trials=1)
    assert again.ok, again.error


def test_a_candidate_cannot_jam_later_evaluations(rms_bundle, tmp_path):
    jammed, after = _own_judge(rms_bundle, tmp_path, [_source("jams_the_oracle_outbox.py"), "BASELINE"])
    assert after["ok"], (jammed, after)


_WITHIN = r"""
import os, sys
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, {root!r})
from runners.sandbox import Evaluator
with Evaluator(sys.argv[1], "interpret", timeout=15, trials=1, spare=False) as ev:
    r = ev.evaluate(open(sys.argv[2]).read(), seed=5, time_it=False, trials=1, static_policy=False)
    print("RESULT", r.stage, r.error.replace(chr(10), " ")[:300])
"""


def _judged_within(bundle, tmp_path, cheat: str, seconds: float) -> str | None:
    """The stage and error of one evaluation by a judge of its own (hard timeout 15 s), or None if the judge
    itself has not answered after ``seconds``."""
    armed = tmp_path / cheat
    armed.write_text(_source(cheat))
    try:
        proc = subprocess.run([sys.executable, "-c", _WITHIN.format(root=str(ROOT)), str(bundle), str(armed)],
                              capture_output=True, text=True, timeout=seconds, check=False)
    except subprocess.TimeoutExpired:
        return None
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    return line[len("RESULT "):]


@pytest.mark.slow
def test_a_fifo_for_a_tensor_file_does_not_stall_the_judge(rms_bundle, tmp_path):
    result = _judged_within(rms_bundle, tmp_path, "fifo_output_file.py", 45)
    assert result is not None, "the judge did not answer within 45 s (its hard timeout is 15 s)"
    assert result.startswith("crashed"), result


@pytest.mark.xfail(strict=True, reason=(
    "runners/isolation.py root fallback (and any run as a normal user): the candidate's worker has the judge's "
    "uid and kill(2) needs no more: SIGKILL to its parent ends the judge (SIGSTOP would stall it; stopping the "
    "spare makes the next candidate time out). Fix: fail closed without the uid wall, or a PID namespace per "
    "candidate worker (unshare --user --pid --fork) so that no other process is visible to it"))
def test_a_candidate_cannot_kill_the_judge(rms_bundle, tmp_path):
    killed, after = _own_judge(rms_bundle, tmp_path, [_source("kills_the_judge.py"), "BASELINE"])
    assert not killed["ok"] and after["ok"], (killed, after)


def _judge_from_a_copy(bundle, tmp_path, sources: list[str]) -> list[dict]:
    """As _own_judge, but the judge and its workers run from a copy of runners/ (attacks that rewrite it)."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "runners", project / "runners", ignore=shutil.ignore_patterns("__pycache__"))
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    task = yaml.safe_load((copy / "task.yaml").read_text())
    task["cases"] = task["cases"][:1]
    (copy / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    proc = subprocess.run([sys.executable, "-c", _JUDGE.format(root=str(project)), str(copy), json.dumps(sources),
                           "untimed"], check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULTS "):])


@pytest.mark.xfail(strict=True, reason=(
    "runners/processes.py: workers import runners/ from the project's tree (PYTHONPATH=PROJECT_ROOT), which a "
    "candidate of the judge's uid (root fallback, or a normal user) can write; it appends a wrapper to "
    "runners/worker.py that zeroes the oracle's outputs and kills the oracle (kill(2), same uid); the judge "
    "restarts the oracle from the rewritten file and the next candidate, which returns zeros, is accepted. Fix: "
    "candidates under another uid or a read-only mount namespace; workers spawned from a verified snapshot"))
def test_a_candidate_cannot_rewrite_the_oracle_for_the_next_one(rms_bundle, tmp_path):
    first, zeros = _judge_from_a_copy(rms_bundle, tmp_path, [_source("rewrites_the_judges_code.py"),
                                                             _source("returns_zeros.py")])
    assert not zeros["ok"] and zeros["stage"] == "correctness", (first, zeros)


@pytest.mark.slow
def test_a_fifo_for_the_worker_log_does_not_stall_the_judge(rms_bundle, tmp_path):
    result = _judged_within(rms_bundle, tmp_path, "log_is_a_fifo.py", 45)
    assert result is not None, "the judge did not answer within 45 s (its hard timeout is 15 s)"
    assert result.startswith("crashed"), result


# Was a strict xfail: "runners/processes.py spawns workers with RLIMIT_AS only and the machine's own /dev/shm and /tmp,
# writable by every user (the candidates' uids too); runners/isolation.py kill_leftovers removes processes, not files:
# what a candidate writes there outlives it." Closed behind the uid wall: a finished worker's user's files in the
# shared scratch folders are removed with its processes (runners/litter.py; the mechanism as another user:
# tests/test_isolation.py). As the judge's own user (no wall: on this machine the interpreter is not readable by other
# users) the candidate's files cannot be told apart from the judge's, and they stay. What a candidate may write there
# while it runs (a full tmpfs during its own evaluation) is unbounded either way: a private size-limited tmpfs per
# worker (a mount namespace) would bound it.
def test_nothing_a_candidate_writes_outside_its_folder_outlives_it(rms_evaluator):
    litter = shm_root() / f"ks-litter-{os.getpid()}-{time.monotonic_ns()}"
    try:
        ev = rms_evaluator.evaluate(_source("litters_shared_memory.py").replace("@LITTER@", str(litter)), seed=5,
                                    time_it=False, trials=1, static_policy=False)
        assert ev.ok, ev.error  # otherwise honest
        if not rms_evaluator.isolation.active:
            assert litter.exists()  # what the same-user mode cannot do (the report says which mode ran)
            pytest.xfail(f"candidates ran as the judge's own user ({rms_evaluator.isolation.reason}): their files "
                         f"outside their folder cannot be told apart from the judge's")
        assert not litter.exists(), f"{litter}, written by the candidate, is still there after its evaluation"
    finally:
        litter.unlink(missing_ok=True)
