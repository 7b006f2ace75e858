"""Attacks on the judge, third round: the search's screening protocol, and what changed with it
(runners/protocol.py `Protocol.search`, runners/judge_clock.py `time_case`, runners/judge.py `profiled_cases`,
runners/wire.py `read_tensor`).

As in tests/test_judge_attacks.py: every cheat runs past the static policy (the judge must hold on its own);
attacks that the judge lets through today are `xfail(strict=True)` with the mechanism in the reason, and pass
once it is fixed. Timing attacks run against a judge of their own in a subprocess, on the timed CPU stand-in of
tests/test_judge_attacks.py (`_SHIM`: host clock instead of CUDA events, direct calls instead of graph replay;
every judge step is the real one), here with the full and the search protocol in one judge.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import CHEATS, ROOT
from test_judge_attacks import _SHIM


def _source(name: str, **marks: str) -> str:
    text = (CHEATS / name).read_text()
    for key, value in marks.items():
        text = text.replace(f"@{key}@", value)
    return text


# One judge, one protocol per evaluation: the full one ("verify") or the search's ("search": the judge's clock and
# the own-kernel share only where a speedup is claimed), both with the stand-in's small numbers.
_JUDGE3 = r"""
import dataclasses, json, os, sys
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, {root!r})
from runners import backends
from runners.backends.base import Backend
from runners.judge import Protocol
from runners.sandbox import Evaluator

bundle, runs = sys.argv[1], json.loads(sys.argv[2])
backend = "cpu-timed-stand-in"
backends.BACKENDS[backend] = Backend(name=backend, device="cpu", timed=True, warp_size=32,
                                     env_set={{"TRITON_INTERPRET": "1"}})
full = Protocol(min_rounds=4, max_rounds=4, case_time_cap_s=0.2, sample_us=1.0, slot_us=1.0, max_slots=2,
                window_us=1.0, max_window_slots=2, window_rounds=3, corroboration_tolerance=0.5, reveal_slots=2,
                window_lead_cycles=0)
results = []
with Evaluator(bundle, backend, timeout=120, trials=1, spare=False, protocol=full) as ev:
    ev.search_protocol = dataclasses.replace(full, window_every_case=False, profile_every_case=False, name="search")
    ev._peak = (1e12, 1 << 40)  # no bandwidth probe on the CPU: plausibility by the speedup bound only
    for source, protocol in runs:
        r = ev.evaluate(source, seed=5, time_it=True, trials=1, static_policy=False, protocol=protocol)
        results.append({{"stage": r.stage, "ok": r.ok, "error": r.error or "", "protocol": r.protocol,
                         "speedups": [c.speedup for c in r.cases], "window_ms": [c.window_ms for c in r.cases],
                         "messages": [c.message for c in r.cases]}})
print("RESULTS " + json.dumps(results))
"""


def _judge(bundle, tmp_path, runs: list[tuple[str, str]]) -> list[dict]:
    """Evaluate (source, protocol) pairs, one after the other, with a judge of their own on the timed stand-in,
    on a copy of the bundle reduced to its first case."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    task = yaml.safe_load((copy / "task.yaml").read_text())
    task["cases"] = task["cases"][:1]
    (tmp_path / "shim.py").write_text(_SHIM)
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tmp_path / "shim.py"}" "$@"\n')
    wrapper.chmod(0o755)
    task["python"] = str(wrapper)
    (copy / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    proc = subprocess.run([sys.executable, "-c", _JUDGE3.format(root=str(ROOT)), str(copy), json.dumps(runs)],
                          check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULTS "):])


# ---- 1. a slowdown hidden behind a claim of parity, where the search's clock does not run ----------------------
REPEATS = 24  # the cheat's kernel runs 24 times per call: its honest credit is about 1/24 of the baseline's speed


@pytest.fixture(scope="module")
def parity_claims(rms_bundle, tmp_path_factory) -> dict:
    source = _source("claims_parity_where_slower.py", REPEATS=str(REPEATS))
    search, verify = _judge(rms_bundle, tmp_path_factory.mktemp("parity"), [(source, "search"), (source, "verify")])
    return {"search": search, "verify": verify}


def test_a_hidden_slowdown_is_quarantined_by_the_full_protocol(parity_claims):
    """Control: the full protocol runs the judge's clock at every case; the pass it times is the real entry
    (24 launches a call), so the claim of near parity is not corroborated."""
    ev = parity_claims["verify"]
    assert ev["protocol"] == "verify" and all(w for w in ev["window_ms"]), ev
    assert not ev["ok"] and ev["stage"] == "timing" and "not corroborated" in ev["error"], ev


@pytest.mark.xfail(strict=True, reason=(
    "runners/judge_clock.py time_case: under Protocol.search() (window_every_case=False) the judge's clock is "
    "skipped wherever the candidate's own samples claim no speedup (candidate_us >= baseline_us), and the case is "
    "credited that claim. The claim is the candidate's: its worker builds the samples' timer from another "
    "function (the kernel launched twice: about 0.5x) while the entry launches it 24 times (honest credit about "
    "0.04x). The search ranks it above honest candidates (and the geometric mean adds any real win it has "
    "elsewhere); bot/optimize.py _decide re-verifies only archive.best(), so once such a candidate is the "
    "champion the full protocol quarantines it and the run ends 'no_improvement' even when an honest faster "
    "candidate was found. Fix: at a case where no speedup is claimed, still time one short window round and "
    "credit min(claim, judge's speedup x (1 + tolerance)); or re-verify the next best candidates when the "
    "champion fails"))
def test_the_search_does_not_credit_a_hidden_slowdown(parity_claims):
    ev = parity_claims["search"]
    assert ev["protocol"] == "search", ev
    caught = not ev["ok"] and ev["stage"] == "timing"
    assert caught or all(s is not None and s <= 0.2 for s in ev["speedups"]), json.dumps(ev)


# ---- 2. the judge's file reader and a symlink loop --------------------------------------------------------------

@pytest.mark.xfail(strict=True, raises=RuntimeError, reason=(
    "runners/wire.py read_tensor: `Path(meta['file']).resolve()` raises RuntimeError ('Symlink loop from ...') on "
    "Python 3.11 for a path through `loop -> loop` in the worker's outbox; runners/sandbox.py Evaluator.evaluate "
    "catches OSError, WireError, ValueError, ... but not RuntimeError, so it leaves `evaluate` (the search records "
    "'evaluator error'; bot/optimize.py's re-verification of a champion that does this only when it sees a "
    "verification, e.g. a trial tag c0t3, has no guard and the job dies). Fix: open the file by its base name "
    "relative to a descriptor of the folder (os.open(name, O_RDONLY|O_NONBLOCK|O_NOFOLLOW, dir_fd=...), refusing a "
    "name with '/'), with no resolve() at all; that also closes the race where an intermediate symlink is swapped "
    "between the check and the open; and catch RuntimeError as a protocol error"))
def test_a_symlink_loop_in_a_reply_is_a_protocol_error(rms_evaluator):
    ev = rms_evaluator.evaluate(_source("symlink_loop_reply.py"), seed=5, time_it=False, trials=1,
                                static_policy=False)
    assert ev.stage == "crashed" and "broke the protocol" in ev.error, (ev.stage, ev.error)


def test_the_evaluator_works_after_a_symlink_loop(rms_evaluator):
    try:
        rms_evaluator.evaluate(_source("symlink_loop_reply.py"), seed=5, time_it=False, trials=1, static_policy=False)
    except RuntimeError:
        pass  # the hole above; what matters here is the next evaluation
    again = rms_evaluator.evaluate(rms_evaluator.baseline, seed=6, time_it=False, trials=1)
    assert again.ok, again.error
