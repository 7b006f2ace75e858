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
                window_lead_cycles=0, window_retries=0)
results = []
with Evaluator(bundle, backend, timeout=120, trials=1, spare=False, protocol=full) as ev:
    ev.search_protocol = dataclasses.replace(full, window_every_case=False, profile_every_case=False, name="search")
    ev._peak = (1e12, 1 << 40)  # no bandwidth probe on the CPU: plausibility by the speedup bound only
    for source, protocol, seed in runs:
        r = ev.evaluate(source, seed=seed, time_it=True, trials=1, static_policy=False, protocol=protocol)
        results.append({{"stage": r.stage, "ok": r.ok, "error": r.error or "", "protocol": r.protocol,
                         "speedups": [c.speedup for c in r.cases], "window_ms": [c.window_ms for c in r.cases],
                         "messages": [c.message for c in r.cases]}})
print("RESULTS " + json.dumps(results))
"""


def _judge(bundle, tmp_path, runs: list[tuple[str, str, int]], cases: list[dict] | None = None) -> list[dict]:
    """Evaluate (source, protocol, seed) triples, one after the other, with a judge of their own on the timed
    stand-in, on a copy of the bundle with ``cases`` (symbols; default: its first case only)."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    task = yaml.safe_load((copy / "task.yaml").read_text())
    first = task["cases"][0]
    task["cases"] = [{**first, "symbols": symbols} for symbols in cases] if cases else [first]
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
REPEATS = 24  # at its slow shape the cheat's kernel runs 24 times per call: honest credit there about 1/24
_PARITY_CASES = [{"T": 3, "H": 256}, {"T": 2, "H": 128}, {"T": 5, "H": 96, "residual": True},
                 {"T": 4, "H": 64, "residual": True}]  # the first is the slow one (H 256)


def _seed_whose_spot_check_misses_the_first(cases: int) -> int:
    """A seed for which the screening's secret spot check draws another case than the first, however many of the
    cases end up claiming no speedup (as runners/judge_clock.py `spot_check` draws today; the judge's secret is the
    evaluation's seed, and the first case is the first of those not clocked)."""
    from runners.protocol import trial_seed

    return next(s for s in range(1, 10_000) if all(trial_seed(s, 90_000, m) % m for m in range(2, cases + 1)))


@pytest.fixture(scope="module")
def parity_claims(rms_bundle, tmp_path_factory) -> dict:
    source = _source("claims_parity_where_slower.py", REPEATS=str(REPEATS), SLOW_HIDDEN="256")
    seed = _seed_whose_spot_check_misses_the_first(len(_PARITY_CASES))
    search, verify = _judge(rms_bundle, tmp_path_factory.mktemp("parity"),
                            [(source, "search", seed), (source, "verify", seed)], cases=_PARITY_CASES)
    return {"search": search, "verify": verify}


def test_a_hidden_slowdown_is_quarantined_by_the_full_protocol(parity_claims):
    """Control: the full protocol runs the judge's clock at every case; the pass it times at the slow shape is the
    real entry (24 launches a call), so the claim there is not corroborated."""
    ev = parity_claims["verify"]
    assert ev["protocol"] == "verify", ev
    assert not ev["ok"] and ev["stage"] == "timing" and "not corroborated" in ev["error"], ev


@pytest.mark.xfail(strict=True, reason=(
    "runners/judge_clock.py time_case/spot_check: under Protocol.search() the judge's clock runs where a speedup is "
    "claimed and at ONE case drawn in secret among the m cases claiming none; the others are credited the "
    "candidate's own claim. Here all four cases claim about 0.25x (the worker times a four-launch function), the "
    "entry is honest at three of them and 6x slower at the fourth (honest credit about 0.04x): the slow case is "
    "clocked with probability 1/4, and with this seed the draw is another case, so the slowdown is credited 0.25x. "
    "Over a search the cheat wins (m-1)/m of its evaluations: it is ranked above honest candidates (and the "
    "geometric mean adds any real win it has elsewhere); bot/optimize.py now re-verifies up to three candidates, "
    "so it costs a verification, not the run. Fix: clock every case claiming no speedup too, with one short round "
    "(a pass of a few ms after one warm-up; a claim below 1.0 is then credited min(claim, judge's speedup x "
    "(1 + tolerance)), as runners/judge_clock.py credit_cap now does wherever the clock runs)"))
def test_the_search_does_not_credit_a_hidden_slowdown(parity_claims):
    ev = parity_claims["search"]
    assert ev["protocol"] == "search", ev
    caught = not ev["ok"] and ev["stage"] == "timing" and ev["error"].startswith("T=3,H=256")  # at the slow case
    # held to the others' credit, not to a number: the claims are host-clock times on the stand-in and shrink
    # together on a loaded machine (at 0.12 absolute the test passed by load alone); honest credit at the slow
    # case is about 1/6 of what the other cases claim, the cheat's about the same as theirs
    speedups = ev["speedups"]
    others = sorted(s for s in speedups[1:] if s is not None)
    assert caught or (speedups[0] is not None and others and speedups[0] <= 0.5 * others[len(others) // 2]), \
        json.dumps(ev)


# ---- 2. the judge's file reader and a symlink loop --------------------------------------------------------------

# (Was a hole: runners/wire.py read_tensor resolved the path, and Path.resolve raises RuntimeError on a symlink loop
# on Python 3.11, which left Evaluator.evaluate as an exception. Files are now opened by name in a descriptor of
# the folder.)
@pytest.fixture(scope="module")
def symlink_loop(rms_evaluator):
    """The symlink loop, evaluated once for both tests below."""
    return rms_evaluator.evaluate(_source("symlink_loop_reply.py"), seed=5, time_it=False, trials=1,
                                  static_policy=False)


def test_a_symlink_loop_in_a_reply_is_a_protocol_error(symlink_loop):
    ev = symlink_loop
    assert ev.stage == "crashed" and "broke the protocol" in ev.error, (ev.stage, ev.error)


def test_the_evaluator_works_after_a_symlink_loop(rms_evaluator, symlink_loop):
    again = rms_evaluator.evaluate(rms_evaluator.baseline, seed=6, time_it=False, trials=1)
    assert again.ok, again.error


# ---- 3. the worker's own folder and processes, on one judge: a helper outside the worker's process group, and an
# outbox swapped for a link ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_case_runs(rms_bundle, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("worker_folder")
    victim = folder / "victim"
    (victim / "inner").mkdir(parents=True)
    (victim / "inner" / "keep.txt").write_text("not the judge's to delete")
    (victim / "keep.txt").write_text("not the judge's to delete")
    hog = _source("hogs_while_its_worker_is_stopped.py", ARMED="armed")
    swap = _source("swaps_its_outbox_for_a_link.py", VICTIM=str(victim))
    hog_verify, hog_search, swapped = _judge(rms_bundle, folder, [(hog, "verify", 5), (hog, "search", 5),
                                                                  (swap, "verify", 5)])
    return {"hog": [hog_verify, hog_search], "swap": swapped, "victim": victim}


# Not strict: the helper's effect is CPU contention on this stand-in, which a machine loaded by other work can
# drown (it passed once in a full suite run beside other jobs); the mechanism stands either way.
@pytest.mark.xfail(strict=False, reason=(
    "runners/alone.py _alone stops the candidate while the oracle is measured with WorkerProcess.pause "
    "(runners/processes.py: os.killpg(SIGSTOP) of the worker's process group). A helper the candidate starts "
    "with start_new_session=True is outside that group and keeps running; it watches /proc/<worker>/stat and burns "
    "the machine exactly while its worker shows state T, i.e. while the oracle's samples and window rounds run. "
    "The oracle's claims, its pass and the judge's wall clock of it grow together, so the honest kernel's fake "
    "speedup (1.7x to 3x on this stand-in) is corroborated, under the full protocol too: it would reach a "
    "report. Behind the uid wall the judge now stops every process of the candidate's user (Isolation."
    "signal_user); this test runs candidates as the judge's own user (the interpreter is not readable by others), "
    "where the candidate's processes cannot be told from the judge's. Fix for that case: "
    "freeze every process of the candidate (a cgroup v2 freezer per candidate worker: write 1 to cgroup.freeze "
    "and wait for 'frozen 1' in cgroup.events; with the uid wall, kill(-1, SIGSTOP) from a helper running as the "
    "candidate's uid), and refuse a candidate whose processes are not all frozen"))
def test_a_helper_outside_the_workers_group_cannot_slow_the_oracle(one_case_runs):
    """Every run is refused, or credits no more than the honest kernel's speedup (about 1; 1.4 leaves room for the
    stand-in's noise on a loaded machine)."""
    runs = one_case_runs["hog"]
    for ev in runs:
        assert not ev["ok"] or max(s or 0.0 for s in ev["speedups"]) < 1.4, json.dumps(runs)


def test_the_judge_deletes_nothing_outside_a_workers_folder(one_case_runs):
    victim = one_case_runs["victim"]
    assert (victim / "keep.txt").exists() and (victim / "inner" / "keep.txt").exists(), (
        f"the judge emptied {victim}: {json.dumps(one_case_runs['swap'])}")


def test_clear_folder_does_not_follow_a_link():
    """The primitive alone, without a race: a worker's outbox that is a link to another folder."""
    import os
    import tempfile
    from pathlib import Path

    from runners.judge import clear_folder

    with tempfile.TemporaryDirectory() as tmp:
        victim, worker = Path(tmp) / "victim", Path(tmp) / "worker"
        (victim / "inner").mkdir(parents=True)
        (victim / "keep.txt").write_text("x")
        worker.mkdir()
        os.symlink(victim, worker / "out")
        try:
            clear_folder(worker / "out")
        except OSError:
            pass  # refusing the link is as good
        assert (victim / "keep.txt").exists() and (victim / "inner").is_dir()


# ---- 4. bytes moved: an output equal to an input is not counted (runners/protocol.py moved_bytes) -------------
# Computed from the oracle's outputs on the judge's inputs: a candidate cannot lower it. What the rule gets wrong is
# the honest kernel's count, either way.

def test_an_input_written_in_place_and_returned_is_counted_once():
    import torch

    from runners.protocol import moved_bytes

    from runners.worker import aliased_outputs

    x, y = torch.randn(1024), torch.randn(1024)
    kwargs = {"x": x.clone(), "y": y}
    out = kwargs["x"].add_(y)  # written in place and returned: the oracle says so (runners/worker.py)
    after = out.clone()  # what reaches the judge: a copy, and the written x, the same values
    assert moved_bytes({"x": x, "y": y}, after, [after], aliased_outputs(out, kwargs)) == 3 * 1024 * 4


def test_an_output_that_copies_an_input_is_counted():
    import torch

    from runners.protocol import moved_bytes

    from runners.worker import aliased_outputs

    x = torch.randn(1024)
    out = x.clone()  # a copy: written by the kernel, equal in value to its input
    assert moved_bytes({"x": x}, out, [], aliased_outputs(out, {"x": x})) == 2 * 1024 * 4
    assert moved_bytes({"x": x}, (x.view(32, 32), out), [], aliased_outputs((x.view(32, 32), out), {"x": x})) \
        == 2 * 1024 * 4  # the input handed back as a view is not counted


# ---- 5. processes left behind the uid wall (runners/isolation.py kill_leftovers) --------------------------------
# Not through the evaluator: the uid wall needs an interpreter other users can read, which this machine's is not.
# A script run as a spare candidate uid that starts a copy of itself in the background and exits (a new pid every
# few milliseconds), against the judge's kill by uid; in a subreaper of its own, so that no process or zombie of
# it outlives the test (this machine's PID 1 reaps no orphans).
_HOPPER = r"""
import ctypes, os, signal, subprocess, sys, tempfile, threading, time
from pathlib import Path
sys.path.insert(0, {root!r})
from runners.isolation import Isolation

ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: the hopper's orphans are ours to reap
done = threading.Event()


def reap():
    while not done.is_set():
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.001)
        except ChildProcessError:
            time.sleep(0.005)


def live(uid):
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
            if int(next(x for x in lines if x.startswith("Uid:")).split()[1]) == uid and \
                    next(x for x in lines if x.startswith("State:")).split()[1] != "Z":
                found.append(int(status.parent.name))
        except (OSError, StopIteration, ValueError, IndexError):
            pass
    return found


def kill_all(uid):  # kill(-1) as the uid: every process of it at once, under the kernel's task list lock
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


iso = Isolation.choose([])
uid = iso.uid
folder = Path(tempfile.mkdtemp(prefix="ks-hopper-", dir="/tmp"))
folder.chmod(0o777)
log, script = folder / "hops", folder / "hop.sh"
script.write_text('#!/bin/sh\n[ "${{1:-0}}" -ge 20000 ] && exit 0\necho "$1" >> ' + str(log) +
                  '\n"$0" $((${{1:-0}} + 1)) &\nexit 0\n')
script.chmod(0o755)
log.touch()
log.chmod(0o666)
threading.Thread(target=reap, daemon=True).start()
survived = []
try:
    for attempt in range(3):
        subprocess.Popen([str(script)], user=uid, group=uid, extra_groups=[], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        killed = Isolation.kill_leftovers(uid)
        before = len(log.read_text().splitlines())
        time.sleep(0.5)
        after = len(log.read_text().splitlines())
        survived.append({{"killed": killed, "hops_after_the_kill": after - before}})
        for _ in range(100):
            kill_all(uid)
            time.sleep(0.02)
            if not live(uid):
                break
finally:
    for _ in range(100):
        kill_all(uid)
        if not live(uid):
            break
        time.sleep(0.02)
    time.sleep(0.2)
    done.set()
    iso.release()
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
print("HOPS", __import__("json").dumps({{"uid": uid, "attempts": survived, "left": live(uid)}}))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() != 0,
                    reason="the uid wall and a kill by uid need root")
def test_no_process_of_a_candidates_uid_survives_the_kill(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _HOPPER.format(root=str(ROOT))], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("HOPS ")), None)
    assert line is not None, proc.stderr[-3000:]
    result = json.loads(line[len("HOPS "):])
    assert not result["left"], result  # the test's own clean-up (kill(-1) as the uid) must always work
    assert all(a["hops_after_the_kill"] <= 2 for a in result["attempts"]), result
