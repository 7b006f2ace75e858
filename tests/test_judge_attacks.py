"""Attacks on the three-role judge, on the CPU interpreter, through the real Evaluator (tests/cheats/).

Each cheat is run past the static policy (`static_policy=False`: the judge must hold on its own) and, where it
is cheap, with it. Attacks that get a wrong kernel past the evaluator today are marked
`xfail(strict=True)` with the mechanism in the reason: each such test passes once the judge is fixed.
Attacks that corrupt the judge's process or its oracle for good run against a judge of their own, in a
subprocess, on a copy of the bundle, so that the shared evaluator is never touched.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import CHEATS, ROOT, run_past_the_policy

from runners.policy import check_source


_ROOT_FALLBACK = (
    "[root fallback] candidates run as the judge's own user when runners/isolation.py cannot give them another "
    "uid (here: the interpreter under /root/.pyenv is not readable by others, so the judge, the oracle and the "
    "candidate all run as root; PR_SET_DUMPABLE=0 does not stop root: CAP_SYS_PTRACE). ")


def _source(name: str) -> str:
    return (CHEATS / name).read_text()


# cheat, stage past the policy, words in the error, stage with the policy
REFUSED = [
    ("subclass_output.py", "correctness", "out of tolerance", "policy"),
    ("lazy_output.py", "kernel", "no Triton kernel of its own", "policy"),
    ("alias_patch_launcher.py", "kernel", "no Triton kernel of its own", "kernel"),  # the policy lets it through
    ("alias_patch_tolerances.py", "correctness", "out of tolerance", "policy"),
    ("alias_patch_result_writer.py", "correctness", "out of tolerance", "policy"),
    ("torch_library_abs.py", "correctness", "NaN in", "correctness"),  # the policy lets it through
    ("forged_reply_path_traversal.py", "crashed", "broke the protocol", "policy"),  # out of turn, or outside the folder
    ("fp16_accumulation.py", "correctness", "out of tolerance", "correctness"),
    ("fixed_eps.py", "correctness", "trial 1", "correctness"),
]


@pytest.mark.parametrize("static_policy", [False, True], ids=["judge-alone", "with-policy"])
@pytest.mark.parametrize("cheat, stage, words, policy_stage", REFUSED, ids=[c[0] for c in REFUSED])
def test_attack_is_refused(rms_evaluator, cheat, stage, words, policy_stage, static_policy):
    if static_policy and policy_stage != "policy":
        # The policy lets it through to the very judge run tested without it: only check that it does.
        assert check_source(_source(cheat), rms_evaluator.baseline, rms_evaluator.spec.entry) == []
        return
    ev = rms_evaluator.evaluate(_source(cheat), seed=5, time_it=False, trials=2, static_policy=static_policy)
    assert not ev.ok
    want = policy_stage if static_policy else stage
    assert ev.stage == want, ev.error
    if want != "policy":
        assert words in ev.error, ev.error


@pytest.mark.xfail(strict=True, reason=(
    _ROOT_FALLBACK +
    "A root candidate reads (and could write) the oracle's memory through /proc/<pid>/mem. Fix: never run "
    "candidates as root: fail closed, or make isolation possible (a world-readable interpreter), or drop "
    "every capability and setuid to nobody in the worker before any candidate code"))
def test_reaching_for_the_oracle_finds_nothing(rms_evaluator):
    """`sys.modules`, `gc`, the other workers' outboxes and `/proc/<worker>/mem`: nothing of the oracle, so the
    cheat's zeros are compared with the oracle's answer."""
    ev = run_past_the_policy(rms_evaluator, _source("reaches_oracle.py"))
    assert "read the memory of worker" not in ev.error, ev.error
    assert ev.stage == "correctness" and "out of tolerance" in ev.error, ev.error


@pytest.fixture(scope="module")
def crashed(rms_evaluator):
    return run_past_the_policy(rms_evaluator, _source("segfault.py"))


def test_the_evaluator_still_works_after_a_segfault(rms_evaluator, crashed):
    assert crashed.stage == "crashed" and "died" in crashed.error, crashed.error
    again = run_past_the_policy(rms_evaluator, _source("honest_rewrite.py"))
    assert again.ok, again.error


def test_a_crash_names_the_signal(crashed):
    """(Was a hole: the exit code was read before the worker was reaped, 'exit code None'.)"""
    assert "SIGSEGV" in crashed.error, crashed.error


@pytest.fixture(scope="module")
def bomb(rms_evaluator):
    return run_past_the_policy(rms_evaluator, _source("memory_bomb.py"))


def test_a_memory_bomb_is_refused_and_the_next_evaluation_works(rms_evaluator, bomb):
    assert not bomb.ok and bomb.stage in ("correctness", "crashed"), bomb.error
    again = run_past_the_policy(rms_evaluator, rms_evaluator.baseline)
    assert again.ok, again.error


def test_a_memory_bomb_meets_a_limit(bomb):
    assert "UNBOUNDED" not in bomb.error, bomb.error


def test_a_malformed_reply_is_a_protocol_error_not_a_judge_crash(rms_evaluator):
    """(Was a hole: a reply without `out` raised KeyError out of Evaluator.evaluate.)"""
    ev = run_past_the_policy(rms_evaluator, _source("malformed_reply.py"))
    assert ev.stage == "crashed" and "broke the protocol" in ev.error, ev.error


# (Was a hole: the launch record is the candidate's own report. The module must also define a
# @triton.jit function; a forger that defines an unused one is still a residual, on the CPU.)
def test_a_forged_launch_record_is_refused(rms_evaluator):
    ev = run_past_the_policy(rms_evaluator, _source("forges_launch_record.py"))
    assert not ev.ok and ev.stage == "kernel", ev.error


@pytest.mark.xfail(strict=True, reason=(
    "'input was modified' is the candidate's own report (runners/worker.py call: `before` clones and "
    "torch.equal in the candidate's process): it rewrites `before` through the caller's frame and clobbers "
    "hidden_states in place unseen. Fix: the judge must read the inputs back itself: the worker maps the "
    "exchange files (shared, not copied) and the judge compares their bytes after the call"))
def test_hidden_input_modification_is_refused(rms_evaluator):
    ev = run_past_the_policy(rms_evaluator, _source("hides_input_modification.py"))
    assert not ev.ok and ev.stage == "correctness" and "modified" in ev.error, ev.error


@pytest.mark.xfail(strict=True, reason=(
    "inherent: a candidate can always tell that it runs in a kernelsmith worker (here: __main__ is "
    "runners.worker) and be correct only there. The evaluator alone accepts it; only running the candidate "
    "where it cannot tell (the champion protocol's run of the repository's own tests) refuses it"))
def test_a_kernel_that_is_right_only_inside_the_judge_is_refused(rms_evaluator):
    ev = run_past_the_policy(rms_evaluator, _source("detects_the_judge.py"))
    assert not ev.ok, "accepted: the kernel skips the normalisation outside a kernelsmith worker"


@pytest.mark.xfail(strict=True, reason=(
    _ROOT_FALLBACK +
    "A child started with start_new_session=True leaves the worker's process group and has no parent-death "
    "signal; Isolation.kill_leftovers kills by uid only when isolation is active. Fix: a PID namespace or a "
    "cgroup per worker, or a PR_SET_CHILD_SUBREAPER supervisor that kills every descendant, in both modes"))
def test_no_process_outlives_the_evaluation(rms_evaluator, tmp_path):
    pid_file = tmp_path / "escaped.pid"
    source = _source("escapes_the_process_group.py").replace("@PID_FILE@", str(pid_file))
    ev = run_past_the_policy(rms_evaluator, source)
    assert ev.ok, ev.error  # otherwise honest
    pid = int(pid_file.read_text())
    try:
        time.sleep(0.5)
        assert not _alive(pid), f"process {pid}, started by the candidate, is still running"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ---- attacks that corrupt the judge or its oracle: a judge of their own, in a subprocess ------------------
# On a copy of the bundle reduced to its first case, one trial per evaluation (enough for these attacks).
# ``timed``: the workers run a CPU stand-in for the GPU timing path (host clock for CUDA events, direct calls
# instead of graph replay) and the judge runs its whole timing protocol, window and reveals included, with
# small numbers: timing attacks on the protocol show on the CPU. The stand-in changes only how a worker
# measures; every judge step is the real one. It judges one measurement of the clock (``window_retries=0``): its host
# clock and its 50 % tolerance make the allowance so wide that a claim several times off is within the retry's band
# of it, so a second chance would test the stand-in's noise; the retry's decision is tests/test_corroboration.py's.
_SHIM = r"""
import runpy, sys, time
import torch


class _Event:
    def __init__(self, enable_timing=False, **kwargs):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return (other.t - self.t) * 1000.0


torch.cuda.Event = _Event
torch.cuda.synchronize = lambda *a, **k: None
torch.cuda._sleep = lambda *a, **k: None
torch.cuda.empty_cache = lambda: None
import runners.timing as timing


def _prepare(self):
    for k, kwargs in enumerate(self.slots):
        self.outputs[k] = self.fn(**kwargs)
    self.graphs, self.method = [], "host-clock"
    return self.method


timing.SlotTimer.prepare = _prepare
timing.device_kernels = lambda fn, around=None: ([], None)
sys.argv = ["runners.worker"]
runpy.run_module("runners.worker", run_name="__main__", alter_sys=True)
"""

_JUDGE = r"""
import dataclasses, json, os, sys
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, {root!r})
from runners import backends
from runners.backends.base import Backend
from runners.judge import Protocol
from runners.sandbox import Evaluator

bundle, sources, timed = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "timed"
backend, protocol = "interpret", None
if timed:
    backend = "cpu-timed-stand-in"
    backends.BACKENDS[backend] = Backend(name=backend, device="cpu", timed=True, warp_size=32,
                                         env_set={{"TRITON_INTERPRET": "1"}})
    protocol = Protocol(min_rounds=4, max_rounds=4, case_time_cap_s=0.2, sample_us=1.0, slot_us=1.0, max_slots=2,
                        window_us=1.0, max_window_slots=2, window_rounds=1, corroboration_tolerance=0.5,
                        reveal_slots=2, window_lead_cycles=0, window_retries=0)
    protocol = dataclasses.replace(protocol, **json.loads(sys.argv[4]))
results = []
with Evaluator(bundle, backend, timeout=90, trials=1, spare=False, protocol=protocol) as ev:
    if timed:
        ev._peak = (1e12, 1 << 40)  # no bandwidth probe on the CPU: plausibility by the speedup bound only
        # the search's screening, with the same small numbers: the clock only where a speedup is claimed
        ev.search_protocol = dataclasses.replace(protocol, window_every_case=False, profile_every_case=False,
                                                 name="search")
    for source in sources:  # a source, or [source, "search"] for one evaluation under the screening protocol
        source, which = source if isinstance(source, list) else (source, "verify")
        r = ev.evaluate(source if source != "BASELINE" else ev.baseline, seed=5, time_it=timed, trials=1,
                        static_policy=False, protocol=which)
        results.append({{"stage": r.stage, "ok": r.ok, "timed": r.timed, "error": r.error or "", "protocol": r.protocol,
                         "speedups": [c.speedup for c in r.cases], "judge_ratios": [c.judge_ratio for c in r.cases],
                         "messages": [c.message for c in r.cases]}})
print("RESULTS " + json.dumps(results))
"""


def first_case_bundle(bundle, tmp_path, timed: bool) -> Path:
    """A copy of ``bundle`` reduced to its first case, in ``tmp_path``; ``timed``: its workers run through the CPU
    stand-in's shim (``_SHIM``: host clock for CUDA events)."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    task = yaml.safe_load((copy / "task.yaml").read_text())
    task["cases"] = task["cases"][:1]
    if timed:
        (tmp_path / "shim.py").write_text(_SHIM)
        wrapper = tmp_path / "python"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tmp_path / "shim.py"}" "$@"\n')
        wrapper.chmod(0o755)
        task["python"] = str(wrapper)
    (copy / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return copy


def _own_judge(bundle, tmp_path, sources: list, timed: bool = False, numbers: dict | None = None) -> list[dict]:
    """Evaluate ``sources`` (each a source, "BASELINE", or [source, "search"] for the search's screening protocol,
    timed only) one after the other with a judge of their own, in a subprocess, on a copy of the bundle reduced
    to its first case; ``numbers`` replace the timed stand-in's protocol numbers."""
    copy = first_case_bundle(bundle, tmp_path, timed)
    proc = subprocess.run([sys.executable, "-c", _JUDGE.format(root=str(ROOT)), str(copy), json.dumps(sources),
                           "timed" if timed else "untimed", json.dumps(numbers or {})],
                          check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULTS "):])


_TIMED = ["forges_sample_times.py", "precomputes_on_refill.py", "overwrites_oracle_reveal.py"]


@pytest.fixture(scope="module")
def timed_attacks(rms_bundle, tmp_path_factory) -> dict:
    """The timing attacks, one after the other, against one judge running its timing protocol on the stand-in
    (they patch only their own worker, which dies after each evaluation); last, the sample-time forger again under
    the search's screening protocol ("screening")."""
    runs = [_source(c) for c in _TIMED] + [[_source("forges_sample_times.py"), "search"]]
    # three rounds a side, the shortest of the last two counting: with one, a single slow request of the oracle's on
    # the stand-in's host clock read the forger at 3.4x and passed it (about one run in five on two cores)
    results = _own_judge(rms_bundle, tmp_path_factory.mktemp("timed"), runs, timed=True, numbers={"window_rounds": 3})
    return dict(zip([*_TIMED, "screening"], results))


def test_forged_sample_times_are_not_corroborated(timed_attacks):
    """Control for the timed stand-in: a worker that reports a quarter of its sample times (what scaling
    `torch.cuda.Event.elapsed_time` does) is quarantined by the judge's own clock."""
    ev = timed_attacks["forges_sample_times.py"]
    assert not ev["ok"] and ev["stage"] == "timing" and "not corroborated" in ev["error"], json.dumps(ev)


def test_screening_still_runs_the_clock_where_a_speedup_is_claimed(timed_attacks):
    """The search's protocol skips the judge's clock only at cases where no speedup is claimed (nothing to
    credit there); a forged claim is a claimed speedup, so the clock runs and quarantines it."""
    ev = timed_attacks["screening"]
    assert ev["protocol"] == "search", json.dumps(ev)
    assert not any("not run" in m for m in ev["messages"]), json.dumps(ev)  # the clock ran
    # quarantined, or (when the host clock of this stand-in is too noisy to resolve) credited nothing
    assert (not ev["ok"] and ev["stage"] == "timing") or all(s <= 1.05 for s in ev["speedups"]), json.dumps(ev)


def test_the_timed_pass_cannot_be_precomputed(timed_attacks):
    """(Was a hole: the window's seed came in an untimed `refill`; the whole pass ran there, fake 2x, ok.)
    The seed now comes with the timed request: the pass done early is on other values, and wrong."""
    ev = timed_attacks["precomputes_on_refill.py"]
    assert not ev["ok"], ev


def test_the_oracles_revealed_outputs_cannot_be_overwritten(timed_attacks):
    """(Was a hole: the oracle's revealed files were decoded after the candidate's reveal, which overwrote
    them with its stale outputs, fake 2x, ok.) The oracle's outputs are now read and checked first."""
    ev = timed_attacks["overwrites_oracle_reveal.py"]
    assert not ev["ok"], ev


@pytest.mark.xfail(strict=True, reason=(
    _ROOT_FALLBACK +
    "The candidate writes the judge's memory through /proc/<judge>/mem (the doubles 0.001/0.004, the float16 "
    "tolerances, become 1e30) and a copy kernel passes. Fix: as for the oracle: no root candidates"))
def test_the_judges_memory_is_out_of_reach(rms_bundle, tmp_path):
    [ev] = _own_judge(rms_bundle, tmp_path, [_source("writes_judge_memory.py")])
    assert not ev["ok"] and ev["stage"] == "correctness", ev


# (Was a hole: a root candidate opens the oracle's reply pipe through /proc/<judge>/fd and slips a reply in; the
# sequence number caught it, but the candidate was blamed and the desynchronised oracle kept, so every later
# evaluation ended 'crashed: reply out of turn'. An oracle whose channel breaks is now blamed and replaced. Still
# open in the root fallback: the candidate reaches the judge's pipes at all, and spoils its own evaluation.)
def test_the_oracle_pipe_cannot_be_poisoned_for_later_evaluations(rms_bundle, tmp_path):
    poisoned, after = _own_judge(rms_bundle, tmp_path, [_source("poisons_the_oracle_pipe.py"), "BASELINE"])
    assert not poisoned["ok"] and after["ok"], (poisoned, after)


# (Was a hole: the oracle was made from the bundle on disk; it is now made from the files the
# judge read once.)
def test_the_bundle_cannot_be_rewritten_by_a_candidate(rms_bundle, tmp_path):
    first, second = _own_judge(rms_bundle, tmp_path, [_source("tampers_with_the_bundle.py")] * 2)
    assert not second["ok"] and second["stage"] == "correctness", (first, second)
