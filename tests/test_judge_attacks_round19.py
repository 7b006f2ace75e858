"""Attacks on the judge, nineteenth round: the two changes of the day.

A. **A trial's two calls at once** (runners/judge.py ``_trial_calls``, ``concurrent``: behind the uid wall, forced here
   with ``Evaluator.pair_trials``): once the oracle has answered a case and autotunes nothing, the oracle's and the
   candidate's requests are sent before either reply is read, the candidate's poison sized from the oracle's cached
   output size (``oracle.cache["out_bytes"]``) and the inputs.

   Three holes were found and closed the same day (each now a plain test):

   1. **A candidate gone before the paired send was blamed on the baseline.** The oracle's request went first; a
      candidate worker that closed its request pipe and exited right after its previous reply
      (``tests/cheats/round19_dies_before_the_paired_send.py``: right values, then gone) made the candidate's
      ``send`` raise PeerGone while the oracle's request was in flight and ``oracle.failed`` set: stage
      ``baseline``, ``harness-error``, and the oracle replaced. The candidate's request now goes first: its crash
      is its own, with the oracle untouched.
   2. **The poison was sized from the case's first answers, not this trial's.** An output whose size follows a
      ``range:`` scalar (trial 0 takes its low end) can be many times the one cached: ``tile_rows(x, n)``, ``n``
      rows of a 256 KiB ``x`` (a rotary cos/sin cache of ``seq_len`` rows is the real form), ``n`` in [1, 64]:
      1.5 MiB of NaN asked for where the output was 3 MiB, so on CUDA an unwritten part of it would no longer
      show. No trial is paired where an argument is a drawn integer range (a float one, RMSNorm's ``eps``,
      sizes nothing).
   3. **"Autotunes nothing" was "no autotuner in the kernel module".** An ``@triton.autotune`` kernel in a helper
      module of the baseline (the entry in one file, the kernels in another, as in real repositories) was
      invisible, so the oracle autotuned inside paired trials while the candidate's call ran (on a GPU its
      kernels would be time-sliced with those benchmarks). The oracle now reports its call's launches that went
      through an autotuner, in any module (``reply["tuners"]``), no trial of such a baseline is paired, and the
      candidate is stopped during the oracle's calls where it may autotune: a case's first call, every call of an
      autotuned baseline, and its ``prepare_timing`` (runners/judge_clock.py).

   What held: a kernel wrong only on the later trials (rows after the first, ``n`` > 1) is refused there; an honest
   kernel whose output follows a range scalar is accepted; after the refusals and the candidate that vanished, the
   next evaluation is ``ok`` (nothing left in a pipe).

B. **The first oracle's autotune picks pinned for the bundle** (runners/autotune_pins.py): read, not attacked with
   a GPU test (the picks are made and pinned on timed backends only, and the CPU stand-in's autotuner does not
   time). The file is the judge's, in the bundle, which a candidate is never told of and, behind the uid wall,
   cannot write (as the judge's own user it can, like ``runners/`` itself: the class the docs already concede).
   What the change adds is permanence: a pick the oracle drew while a candidate could load the device is now
   given to every later oracle of the bundle, the champion's verification in fresh processes and a resumed job
   included, which used to draw their own. The oracle's ``prepare_timing`` (its warm-up autotunes at keys only the
   slots meet: a range scalar's high end and two draws) and its first trial of a case ran with the candidate not
   stopped; they now run with it stopped (A.3).

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

    fixed = one_module_bundle(tmp_path_factory.mktemp("r19-fixed"), "ops/tile_rows.py", _TILE, kernel="tile_rows",
                              entry="tile_rows", args=[ArgSpec("x", shape=["H"]), ArgSpec("n", value=4)],
                              cases=[Case(symbols={"H": 65536}, dtype="float32")])
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
    with Evaluator(fixed, "interpret", timeout=120, trials=3) as ev:  # n fixed: trials 1 and 2 are paired
        ev.pair_trials = True
        runs["fixed"] = ev.evaluate(ev.baseline, seed=24)
        before = ev._oracle
        runs["dies_paired"] = ev.evaluate(dies, seed=21, static_policy=False)
        runs["oracle_replaced"] = ev._oracle is not before
        runs["after"] = ev.evaluate(ev.baseline, seed=22)
        ev.pair_trials = False
        runs["dies_sequential"] = ev.evaluate(dies, seed=23, static_policy=False)
    return runs


def test_an_honest_output_that_follows_a_range_scalar_passes(tile_runs):
    ev = tile_runs["honest"]
    assert ev.ok, ev.error
    assert "correctness.both" not in ev.phases, ev.phases  # a drawn range: never paired (A.2)
    assert tile_runs["fixed"].ok and tile_runs["fixed"].phases.get("correctness.both", 0) > 0  # n fixed: paired
    sizes = [c["out"] for c in tile_runs["honest_calls"] if "out" in c]
    assert len(sizes) == 3 and sizes[0] == 65536 * 4 and max(sizes) > 6 * 65536 * 4, sizes  # n = 1, then larger


def test_a_kernel_wrong_only_on_the_later_trials_is_refused(tile_runs):
    ev = tile_runs["wrong"]
    assert not ev.ok and ev.stage == "correctness" and "trial 1" in ev.error, (ev.stage, ev.error)


def test_after_the_refusals_and_a_vanished_candidate_the_next_evaluation_is_ok(tile_runs):
    assert tile_runs["after"].ok, tile_runs["after"].error


def test_the_vanishing_candidate_one_call_after_the_other_is_its_own_crash(tile_runs):
    """Control: without pairing the candidate's PeerGone comes with no oracle request in flight."""
    ev = tile_runs["dies_sequential"]
    assert not ev.ok and ev.stage == "crashed" and "harness-error" not in ev.notes, (ev.stage, ev.error, ev.notes)


def test_a_candidate_gone_before_the_paired_send_is_its_own_crash(tile_runs):
    ev = tile_runs["dies_paired"]
    assert ev.stage == "crashed" and "harness-error" not in ev.notes, (ev.stage, ev.error[:300], ev.notes)
    assert not tile_runs["oracle_replaced"]


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
    """The hidden autotuner's bundle twice: ``n`` a drawn range (a new key at every trial), and ``n`` fixed (one key:
    nothing but the helper module's autotuner keeps the trials from being paired)."""
    from runners.sandbox import Evaluator
    from runners.task import ArgSpec, Case, TaskSpec, write_task

    out: dict = {}
    for name, n in (("ranged", ArgSpec("n", range=[1, 8])), ("fixed", ArgSpec("n", value=4))):
        root = tmp_path_factory.mktemp(f"r19-autotune-{name}")
        log = root / "when.log"
        bundle = root / "bundle"
        for rel, text in (("ops/head_scale.py", _HEAD_SCALE), ("ops/_impl.py", _IMPL.replace("@LOG@", str(log)))):
            (bundle / "baseline" / rel).parent.mkdir(parents=True, exist_ok=True)
            (bundle / "baseline" / rel).write_text(text)
        write_task(bundle, TaskSpec(kernel="head_scale", module="ops/head_scale.py", entry="head_scale",
                                    files=["ops/head_scale.py", "ops/_impl.py"],
                                    args=[ArgSpec("x", shape=["T", "H"]), n],
                                    cases=[Case(symbols={"T": 4, "H": 8}, dtype="float32")]))
        with Evaluator(bundle, "interpret", timeout=120, trials=3) as ev:
            ev.pair_trials = True
            result = ev.evaluate((CHEATS / AUTOTUNE).read_text().replace("@LOG@", str(log)), seed=31,
                                 static_policy=False)
        lines = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
        spans = lambda who, lines=lines: [(float(a), float(b)) for w, a, b in lines if w == who]  # noqa: E731
        out[name] = {"ev": result, "oracle": spans("oracle-bench"), "candidate": spans("candidate")}
    return out


def test_the_hidden_autotuner_preconditions(autotune_run):
    """The candidate is accepted (its values are the baseline's) and no trial was paired, in either bundle; the
    oracle's autotuner timed configs more than once where its key follows the range (trial 0's key and a later
    trial's): the next test's overlaps would have been possible."""
    for name in ("ranged", "fixed"):
        ev = autotune_run[name]["ev"]
        assert ev.ok, (name, ev.error)
        assert "correctness.both" not in ev.phases, (name, ev.phases)
        assert autotune_run[name]["oracle"] and autotune_run[name]["candidate"], (name, autotune_run[name])
    assert len(autotune_run["ranged"]["oracle"]) >= 4, autotune_run["ranged"]


@pytest.mark.parametrize("name", ["ranged", "fixed"])
def test_no_oracle_autotune_runs_while_the_candidate_runs(autotune_run, name):
    overlaps = [(o, c) for o in autotune_run[name]["oracle"] for c in autotune_run[name]["candidate"]
                if o[0] < c[1] and c[0] < o[1]]
    assert not overlaps, overlaps
