"""Attacks on the judge, nineteenth round: the two changes of the day.

A. **A trial's two calls at once** (runners/judge.py ``_trial_calls``, ``concurrent``: behind the uid wall, forced here
   with ``Evaluator.pair_trials``): once the oracle has answered a case and autotunes nothing, the oracle's and the
   candidate's requests are sent before either reply is read, the candidate's poison sized from the oracle's cached
   output size (``oracle.cache["out_bytes"]``) and the inputs.

   1. **A candidate gone before the paired send is blamed on the baseline** (strict xfail). The oracle's request is
      sent first; a candidate worker that closed its request pipe and exited right after its previous reply
      (``tests/cheats/round19_dies_before_the_paired_send.py``: right values, then gone) makes the candidate's
      ``send`` raise PeerGone while the oracle's request is in flight and ``oracle.failed`` is set. The evaluator
      then reads it as the oracle's fault: stage ``baseline``, note ``harness-error``, "the oracle worker broke the
      protocol or died", and the oracle is ended and replaced. One after the other (control, plain test) the same
      candidate is ``crashed``. What the report counts as a harness failure is the candidate's, and every such
      candidate costs a fresh oracle (on a GPU its start, load and compiles).
   2. **The poison is sized from the case's first answers, not this trial's** (strict xfail). An output whose size
      follows a ``range:`` scalar (trial 0 takes its low end) can be many times the one cached: here ``tile_rows(x,
      n)``, ``n`` rows of a 256 KiB ``x`` (a rotary cos/sin cache of ``seq_len`` rows from a small ``inv_freq`` is
      the real form), ``n`` in [1, 64]. The paired trials asked for ``2 max(256 KiB, 256 KiB) + 1 MiB`` = 1.5 MiB
      of NaN bytes at trial 1 where the oracle's output was 3 MiB (``n`` = 12; up to 16 MiB at ``n`` = 64, and the
      sequential path asks ``2 out + 1 MiB``): on CUDA the rest of the candidate's output lands in memory no NaN
      was written to, and an unwritten part of it no longer shows (on the CPU ``_poison`` does nothing; the test
      reads the sizes asked for).
   3. **"Autotunes nothing" is "no autotuner in the kernel module"** (strict xfail). ``oracle.cache["autotuned"]``
      is ``bool(reply["autotune"])``, and the oracle's ``autotune`` state lists the module-level autotuners of the
      kernel module only (runners/launches.py ``autotuners``). An ``@triton.autotune`` kernel in a helper module of
      the baseline (a real repository's layout: the entry in one file, the kernels in another) is invisible: the
      trials are paired, and where its key follows a ``range:`` scalar each later trial meets a new key and the
      oracle autotunes inside the paired trial, while the candidate's call runs. The baseline's autotuner here
      times configs by the clock (as Triton's ``do_bench`` does on a GPU) and logs when; the candidate
      (``tests/cheats/round19_runs_while_the_oracle_autotunes.py``, right values) busies the host during its call
      and logs when: the oracle's config timings fall inside the candidate's calls. On a GPU the candidate's
      kernels are time-sliced with those benchmarks, so the pick the oracle keeps for the timing phase (and
      which, being invisible, ``autotune-pins.json`` does not keep either) is one the candidate could skew. Before
      the change a candidate's call never overlapped an oracle call. (A plain test shows the preconditions: the
      candidate is accepted, the trials were paired, and the oracle did autotune in them.)

   What held (plain tests): a kernel wrong only on the paired trials (rows after the first, ``n`` > 1) is refused
   there; an honest kernel whose output follows a range scalar is accepted on paired trials (no false refusal from
   the cached size); after the refusals and the candidate that vanished, the next evaluation is ``ok`` (nothing
   left in a pipe: the oracle that had a request in flight was replaced).

B. **The first oracle's autotune picks pinned for the bundle** (runners/autotune_pins.py): read, not attacked with
   a GPU test (the picks are made and pinned on timed backends only, and the CPU stand-in's autotuner does not
   time). The file is the judge's, in the bundle, which a candidate is never told of and, behind the uid wall,
   cannot write (as the judge's own user it can, like ``runners/`` itself: the class the docs already concede).
   What the change adds is permanence: a pick the oracle drew while a candidate could load the device is now
   given to every later oracle of the bundle, the champion's verification in fresh processes and a resumed job
   included, which used to draw their own. The oracle's window ``prepare_timing`` (its warm-up autotunes at keys
   only the slots meet: a range scalar's high end and two draws) runs with the candidate not stopped
   (runners/judge_clock.py ``_corroborate``, only the passes are ``_alone``), and so does its first trial of a case.
   See the report for the proposed fixes.

Runs on the interpreter; module fixtures, small cases.
"""
from __future__ import annotations

import pytest
from conftest import CHEATS
from test_judge_attacks_round7 import one_module_bundle

from runners.protocol import nbytes_of

DIES = "round19_dies_before_the_paired_send.py"
AUTOTUNE = "round19_runs_while_the_oracle_autotunes.py"

_TILE = '''"""n rows, each twice x."""
import torch
import triton
import triton.language as tl


@triton.jit
def _tile_kernel(x_ptr, out_ptr, H, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < H
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * H + offs, x * 2.0, mask=mask)


def tile_rows(x, n):
    H = x.shape[0]
    out = torch.empty((n, H), dtype=x.dtype, device=x.device)
    _tile_kernel[(n,)](x, out, H, BLOCK=triton.next_power_of_2(H))
    return out
'''

# right on the first row only: trial 0 (n at its low end, 1) passes; every later trial has n > 1 rows
_WRONG_AFTER_ROW_0 = _TILE.replace("x * 2.0, mask=mask)", "tl.where(row > 0, x * 2.0 + 0.5, x * 2.0), mask=mask)")


@pytest.fixture(scope="module")
def tile_runs(tmp_path_factory) -> dict:
    """Evaluations of ``tile_rows`` (x: 65536 float32, n in [1, 64]) by one evaluator, with the sizes of the poison
    asked for and of the output the candidate returned, call by call."""
    from runners.processes import WorkerProcess
    from runners.sandbox import Evaluator
    from runners.judge import Judge
    from runners.task import ArgSpec, Case

    bundle = one_module_bundle(tmp_path_factory.mktemp("r19-tile"), "ops/tile_rows.py", _TILE, kernel="tile_rows",
                               entry="tile_rows", args=[ArgSpec("x", shape=["H"]), ArgSpec("n", range=[1, 64])],
                               cases=[Case(symbols={"H": 65536}, dtype="float32")])
    calls: list[dict] = []
    send, reply = WorkerProcess.send, Judge._candidate_reply

    def recording_send(self, op, **fields):
        if self.role == "candidate" and op == "call":
            calls.append({"tag": fields.get("tag"), "poison": fields.get("poison_bytes")})
        return send(self, op, **fields)

    def recording_reply(self, r, ref_reply):
        got = reply(self, r, ref_reply)
        calls[-1]["out"] = nbytes_of(got[1])
        return got

    runs: dict = {}
    dies = (CHEATS / DIES).read_text()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WorkerProcess, "send", recording_send)
        mp.setattr(Judge, "_candidate_reply", recording_reply)
        with Evaluator(bundle, "interpret", timeout=120, trials=3) as ev:
            ev.pair_trials = True
            runs["honest"] = ev.evaluate(ev.baseline, seed=19)
            runs["honest_calls"] = list(calls)
            runs["wrong"] = ev.evaluate(_WRONG_AFTER_ROW_0, seed=20, static_policy=False)
            before = ev._oracle
            runs["dies_paired"] = ev.evaluate(dies, seed=21, static_policy=False)
            runs["oracle_replaced"] = ev._oracle is not before
            runs["after"] = ev.evaluate(ev.baseline, seed=22)
            ev.pair_trials = False
            runs["dies_sequential"] = ev.evaluate(dies, seed=23, static_policy=False)
    return runs


def test_an_honest_output_that_follows_a_range_scalar_passes_the_paired_trials(tile_runs):
    ev = tile_runs["honest"]
    assert ev.ok, ev.error
    assert ev.phases.get("correctness.both", 0) > 0, ev.phases  # trials 1 and 2 were paired
    sizes = [c["out"] for c in tile_runs["honest_calls"] if "out" in c]
    assert len(sizes) == 3 and sizes[0] == 65536 * 4 and max(sizes) > 6 * 65536 * 4, sizes  # n = 1, then larger


def test_a_kernel_wrong_only_on_the_paired_trials_is_refused(tile_runs):
    ev = tile_runs["wrong"]
    assert not ev.ok and ev.stage == "correctness" and "trial 1" in ev.error, (ev.stage, ev.error)


def test_after_the_refusals_and_a_vanished_candidate_the_next_evaluation_is_ok(tile_runs):
    assert tile_runs["after"].ok, tile_runs["after"].error


def test_the_vanishing_candidate_one_call_after_the_other_is_its_own_crash(tile_runs):
    """Control: without pairing the candidate's PeerGone comes with no oracle request in flight."""
    ev = tile_runs["dies_sequential"]
    assert not ev.ok and ev.stage == "crashed" and "harness-error" not in ev.notes, (ev.stage, ev.error, ev.notes)


@pytest.mark.xfail(strict=True, reason=(
    "paired send order: the oracle's request goes out first, so a candidate worker that closed its request pipe and "
    "exited after its previous (right) reply makes candidate.send raise PeerGone with oracle.failed set; the "
    "evaluator reports stage 'baseline' + 'harness-error' ('the oracle worker broke the protocol or died') and "
    "replaces the oracle. Fix: send the candidate's request first (a failed send then leaves nothing in flight), or "
    "on a failed candidate send receive the oracle's reply before re-raising, so the fault stays the candidate's"))
def test_a_candidate_gone_before_the_paired_send_is_its_own_crash(tile_runs):
    ev = tile_runs["dies_paired"]
    assert ev.stage == "crashed" and "harness-error" not in ev.notes, (ev.stage, ev.error[:300], ev.notes)
    assert not tile_runs["oracle_replaced"]


@pytest.mark.xfail(strict=True, reason=(
    "paired poison = 2 max(cached out bytes, input bytes) + 1 MiB, the cache filled at trial 0 where a range scalar "
    "takes its low end: an output that grows with it (n rows of x) was 3 MiB at trial 1 (n = 12) while 1.5 MiB of NaN was "
    "asked for, so on CUDA an unwritten part of it no longer shows. Fix: key oracle.cache['out_bytes'] by the case and "
    "the trial's scalar values (pair only calls the oracle answered at the same values), or do not pair where an "
    "argument has a range"))
def test_the_paired_poison_covers_the_output(tile_runs):
    calls = [c for c in tile_runs["honest_calls"] if "out" in c]
    short = [(c["tag"], c["poison"], c["out"]) for c in calls if c["poison"] < c["out"]]
    assert not short, short


# ---- A.3: an autotuner the kernel module does not show --------------------------------------------------------

_HEAD_SCALE = '''"""Twice the first n columns of each row (the kernel lives in ops/_impl.py)."""
import torch
import triton

from . import _impl


def head_scale(x, n):
    rows, width = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _impl.launch(x, out, n, triton.next_power_of_2(width))
    return out
'''

_IMPL = '''"""The autotuned kernel of ops/head_scale.py. Its configs are timed by the clock, as do_bench times them on a GPU
(about 0.1 s a config), and each timing is logged (the test reads when the oracle's autotuner ran)."""
import time

import triton
import triton.language as tl


def _bench(fn, quantiles=None, **kwargs):
    t0 = time.time()
    runs = 0
    while time.time() - t0 < 0.1:
        fn()
        runs += 1
    t1 = time.time()
    if __name__.startswith("ks_baseline"):
        with open("@LOG@", "a") as log:
            log.write(f"oracle-bench {t0} {t1}\\n")
    return [(t1 - t0) / runs] * 3


@triton.autotune(configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=2)], key=["n"], do_bench=_bench)
@triton.jit
def _head_scale_kernel(x_ptr, out_ptr, stride_x, stride_out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_out + offs, x * 2.0, mask=mask)


def launch(x, out, n, block):
    _head_scale_kernel[(x.shape[0],)](x, out, x.stride(0), out.stride(0), n, BLOCK=block)
'''


@pytest.fixture(scope="module")
def autotune_run(tmp_path_factory) -> dict:
    from runners.sandbox import Evaluator
    from runners.task import ArgSpec, Case, TaskSpec, write_task

    root = tmp_path_factory.mktemp("r19-autotune")
    log = root / "when.log"
    bundle = root / "bundle"
    for rel, text in (("ops/head_scale.py", _HEAD_SCALE), ("ops/_impl.py", _IMPL.replace("@LOG@", str(log)))):
        (bundle / "baseline" / rel).parent.mkdir(parents=True, exist_ok=True)
        (bundle / "baseline" / rel).write_text(text)
    write_task(bundle, TaskSpec(kernel="head_scale", module="ops/head_scale.py", entry="head_scale",
                                files=["ops/head_scale.py", "ops/_impl.py"],
                                args=[ArgSpec("x", shape=["T", "H"]), ArgSpec("n", range=[1, 8])],
                                cases=[Case(symbols={"T": 4, "H": 8}, dtype="float32")]))
    with Evaluator(bundle, "interpret", timeout=120, trials=3) as ev:
        ev.pair_trials = True
        result = ev.evaluate((CHEATS / AUTOTUNE).read_text().replace("@LOG@", str(log)), seed=31,
                             static_policy=False)
    lines = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    spans = lambda who: [(float(a), float(b)) for w, a, b in lines if w == who]  # noqa: E731
    return {"ev": result, "oracle": spans("oracle-bench"), "candidate": spans("candidate")}


def test_the_hidden_autotuner_preconditions(autotune_run):
    """The candidate is accepted (its values are the baseline's), the trials were paired (the oracle's state lists no
    autotuner), and the oracle's autotuner timed configs more than once (trial 0's key and a later trial's)."""
    ev = autotune_run["ev"]
    assert ev.ok, ev.error
    assert ev.phases.get("correctness.both", 0) > 0, ev.phases
    assert len(autotune_run["oracle"]) >= 4 and autotune_run["candidate"], autotune_run


@pytest.mark.xfail(strict=True, reason=(
    "'autotunes nothing' is bool(reply['autotune']), the kernel module's own autotuners only: an @triton.autotune "
    "kernel in a helper module keyed on a range scalar autotunes at each new value inside a paired trial, while "
    "the candidate's call runs (on a GPU its kernels time-slice the oracle's benchmarks and can skew the pick kept "
    "for timing). Fix: pair only where the oracle's call met no new autotuner key (the worker can report any "
    "Autotuner.run that benchmarked, via the launch hooks, whatever module the kernel is in), or pair only calls "
    "whose scalar values the oracle has already answered; and stop the candidate during the oracle's first call of "
    "a case and its prepare_timing, where it autotunes too"))
def test_no_oracle_autotune_runs_while_the_candidate_runs(autotune_run):
    overlaps = [(o, c) for o in autotune_run["oracle"] for c in autotune_run["candidate"]
                if o[0] < c[1] and c[0] < o[1]]
    assert not overlaps, overlaps

