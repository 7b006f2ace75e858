"""Attacks on the judge, twentieth round: the two changes of the day.

A. **The window's fill from a counter-based hash** (runners/window_fill.py, used by runners/inputs.py ``SlotBank.fill``
   with ``per_slot_scales=False``): element ``i`` of a block is a function of ``(key, i)`` alone, the key sent with the
   timed request. The judge credits the candidate's pass as its request's wall minus the oracle's extra (lead, fill,
   commitments, round trip), and holds only the lead and the commitments as what a candidate could leave out
   (runners/corroboration.py): the fill is taken as work both sides must do. A counter-based generator gives any
   element on its own, so a worker can fill only what its kernel reads, or generate its inputs in its kernel, and the
   fill it skipped is credited to its pass.

   1. **Only the rows it reads** (``tests/cheats/round20_fills_only_the_rows_it_reads.py``, open). An
      embedding gather (``T`` rows of a ``V x H`` table; sglite's ``embedding_lookup`` is one, at V=32000, H=4096) with
      the baseline's own kernel, whose window fill scatters the generator's values at the rows its ``ids`` name and
      nothing else (the checkpoints' links, which take table values at drawn places through ``torch.take``, are
      given the generator's values there). Every output of every slot, every opened chunk and every checkpoint trace
      is right: the judge sees nothing. Its fill takes 2-6 % of the oracle's, and the clock credits the difference as
      pass time. On this stand-in (torch one thread a worker, T=16, V=4096, H=128, 12 slots, claims of 1.6x) the
      oracle's fill was 30-60 ms against passes of 60-150 ms; six runs credited the cheat 1.26-1.70x (its claim, or
      the clock's view plus 10 %), the honest copy 0.72-1.04x. Not asserted: on this loaded machine (a CI run on both
      cores) the same clock also saw the honest copy at up to 5.9x in one run and left it unresolved in two, so no
      bound on the stand-in's credit is steady enough for a strict xfail. The strict xfail is the credit rule's
      arithmetic on the H200's numbers (``test_a_skipped_fill_of_the_h200s_size_is_not_credited``); the plain test
      asserts what is steady: every check passed, the fill skipped.
   2. **Generating the inputs in the kernel** (dense entries: a norm, an activation): the kernel calls
      ``runners.window_fill._value`` (a ``@triton.jit`` function, importable) on the element's index and skips both
      the fill's write and its own read of the input. Not built here: on a CPU the generation costs what the fill
      does. The prediction for the H200 is ``test_a_skipped_fill_of_the_h200s_size_is_not_credited`` below; the
      fused kernel itself (add + RMSNorm whose x and residual come from ``_value``, the same bits as fill + honest
      kernel under the interpreter) is bench/window_fill_fused_gpu.py, not run on a GPU yet.

   How much the new generator changes: replicating ``normal_`` bit for bit meant torch's Philox offsets per thread of
   its grid-stride loop and curand's Box-Muller (log, sincos); the new values come from three 64-bit multiplies per
   pair of elements, in a jit function the candidate can import, any element on its own. The loot is smaller: the
   oracle's fill of a prefill window is 1.07-1.45 ms (2.15-3.2 GB) where ``normal_`` took 2.5-3.6 ms, against passes
   of 1.7-5 ms (bench/results/evaluator-h200/session15). At decode sizes (0.07 GB, 0.07 ms) it is small against the
   pass. What the values are besides (a lattice of 262,141 multiples of ``std * sqrt(3) / 65536``, within
   ``2 sqrt(3) std``) tells a window from a correctness trial (those still draw ``normal_``), which any code could
   already tell (the inherent limit of tests/test_judge_attacks.py); a kernel right only on such values still has to
   be right on every window slot.

B. **The commitments read the outputs where they lie** (runners/commit_blocks.py, hash_tree.fold_table): runs in the
   candidate's own process, like the rest of its commitments, which it can compute however it likes; the judge
   recomputes shown slots (runners/protocol.py ``commitment_of``) and climbs opened chunks (runners/openings.py) on
   its CPU, where no table is used. So a table pointing elsewhere, stale or aliased only changes the integers the
   worker commits to, and those are checked against the bytes it shows. What must hold for the trusted oracle (whose
   commitments must be the judge's integers): outputs that alias each other or an input, views at an offset, zero
   sizes: ``test_odd_outputs_hashed_in_place_give_the_judges_integers``.

Runs on the interpreter and the timed CPU stand-in (round 4's judge script, torch one thread a worker: with two
threads on a loaded machine a fill took 7 to 600 ms, likely a thread pool waiting on a descheduled thread).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import ROOT
from test_judge_attacks import _SHIM
from test_judge_attacks_round4 import _JUDGE4, _source
from test_judge_attacks_round7 import one_module_bundle

from runners import window_fill
from runners.corroboration import corroborate, credit_cap
from runners.protocol import commitment_of
from runners.task import ArgSpec, Case

SPARSE = "round20_fills_only_the_rows_it_reads.py"
EMBED = '''"""T rows of a table, gathered."""
import torch
import triton
import triton.language as tl


@triton.jit
def _embed_kernel(ids_ptr, table_ptr, out_ptr, H, stride_v, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    i = tl.load(ids_ptr + row).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < H
    x = tl.load(table_ptr + i * stride_v + offs, mask=m, other=0.0)
    tl.store(out_ptr + row * H + offs, x, mask=m)


def embed(ids, table):
    T = ids.shape[0]
    V, H = table.shape
    out = torch.empty((T, H), dtype=table.dtype, device=table.device)
    _embed_kernel[(T,)](ids, table, out, H, table.stride(0), BLOCK=triton.next_power_of_2(H))
    return out
'''
V, H, T = 4096, 128, 16  # the oracle's fill (12 tables of 2 MB) about half its pass of 12 gathers on the stand-in
SYMBOLS = {"T": T, "V": V, "H": H}
# every slot shown (and opened), a tolerance of 10 %
NUMBERS = {"max_slots": 12, "max_window_slots": 12, "reveal_slots": 12, "corroboration_tolerance": 0.1}
CLAIM = "0.625"  # the cheat's sample times against its own: a claimed 1.6x

_ONE_THREAD = "import torch\ntorch.set_num_threads(1)\n"
_JUDGE20 = _JUDGE4.replace(
    '"messages": [c.message for c in r.cases]',
    '"messages": [c.message for c in r.cases], "parts": [c.window_parts for c in r.cases], '
    '"claimed_parts": [c.window_claimed_parts for c in r.cases], "baseline_us": [c.baseline_us for c in r.cases], '
    '"judge_us": [c.judge_us for c in r.cases]')


def _judge(bundle, tmp_path, runs: list) -> list[dict]:
    """Round 4's ``_timed_judge`` with the window's parts in its results and torch on one thread in each worker."""
    assert _JUDGE20 != _JUDGE4 and "import torch\n" in _SHIM
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    task = yaml.safe_load((copy / "task.yaml").read_text())
    task["cases"] = [{**task["cases"][0], "symbols": SYMBOLS}]
    (tmp_path / "shim.py").write_text(_SHIM.replace("import torch\n", _ONE_THREAD, 1))
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tmp_path / "shim.py"}" "$@"\n')
    wrapper.chmod(0o755)
    task["python"] = str(wrapper)
    (copy / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    proc = subprocess.run([sys.executable, "-c", _JUDGE20.format(root=str(ROOT)), str(copy), json.dumps(runs)],
                          check=False, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULTS "):])


@pytest.fixture(scope="module")
def fill_runs(tmp_path_factory) -> dict:
    """The honest gather against itself, then the sparse filler, against one judge on the timed stand-in."""
    bundle = one_module_bundle(tmp_path_factory.mktemp("r20-embed"), "ops/embed.py", EMBED, kernel="embed",
                               entry="embed",
                               args=[ArgSpec("ids", shape=["T"], dtype="int64", low=0, high=V),
                                     ArgSpec("table", shape=["V", "H"], vary=False)],
                               cases=[Case(symbols=dict(SYMBOLS), dtype="float32")])
    runs = _judge(bundle, tmp_path_factory.mktemp("r20-timed"),
                  [(EMBED, "verify", 5, NUMBERS), (_source(SPARSE, FACTOR=CLAIM), "verify", 6, NUMBERS)])
    return dict(zip(["honest", "sparse"], runs))


def _fills(run: dict) -> tuple[float, float]:
    """The oracle's and the candidate's shortest fill over the counted rounds (ms; the candidate's by its own events:
    the stand-in's worker code is the honest one there, only its fill was replaced)."""
    oracle = min(p["fill"] for p in run["parts"][0][1:])
    candidate = min(p["fill"] for p in run["claimed_parts"][0][1:])
    return oracle, candidate


def _summary(run: dict) -> str:
    keep = ("stage", "ok", "error", "speedups", "judge_ratios", "baseline_us", "judge_us", "window_ms")
    return json.dumps({k: run.get(k) for k in keep})[:1500]


def test_the_sparse_filler_passes_every_check_and_skips_most_of_the_fill(fill_runs):
    """Every slot of every round shown and right, every chunk opened and every checkpoint trace right: the judge
    refuses nothing but, at most, a claim its clock did not see (the stand-in's noise). Its fill took a fifth of the
    oracle's or less, where the honest copy's took about the oracle's (the control; a quarter at least, for the
    stand-in's noise). Printed with ``-s``: what the judge credited each."""
    honest, sparse = fill_runs["honest"], fill_runs["sparse"]
    print("honest:", _summary(honest), _fills(honest))
    print("sparse:", _summary(sparse), _fills(sparse))
    for run in (honest, sparse):
        assert run["ok"] or (run["stage"] == "timing" and "not corroborated" in run["error"]), _summary(run)
    oracle, own = _fills(honest)
    assert own > 0.25 * oracle, (oracle, own)
    oracle, own = _fills(sparse)
    assert own < 0.2 * oracle, (oracle, own)


# ---- the GPU form, as arithmetic: the H200's numbers ---------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason=(
    "runners/corroboration.py corroborate: the candidate's pass is its window request's wall minus the oracle's "
    "extra, fill included, and the fill is not in what a worker could leave out (``shaveable_b``: lead and "
    "commitments); runners/window_fill.py makes every element a function of (key, index) with the key in the worker's "
    "hands. With the H200's window at M=512, N=4096 (765 slots, 3.2 GB of inputs; bench/results/evaluator-h200/"
    "session15: pass 4.4 ms, commitments 3.5 ms, lead 0.05 ms, the counter-based fill 1.45 ms) a worker that skips "
    "the fill, filling only what its kernel reads (tests/cheats/round20_fills_only_the_rows_it_reads.py, 1.26-1.70x "
    "on the stand-in) or generating its inputs in its kernel (runners.window_fill._value, bench/window_fill_fused_gpu"
    ".py), with a kernel exactly as fast as the baseline's, is credited about 1.47x (4.4 ms against 2.95 and the "
    "lead), 1.54x with the tolerance; not reading its inputs adds what the kernel spent loading them. Fix (outside "
    "window_fill.py: any generator the worker runs it can run sparsely or in its kernel; one whose elements hang on a "
    "whole-slot reduction still leaves it a compute-only pass without the writes): values the candidate's process "
    "cannot produce, the trusted oracle writing the candidate's window blocks (CUDA IPC) from a key the candidate never"
    " sees, while the candidate is stopped and its device queue is empty, and the fill out of both timed requests"))
def test_a_skipped_fill_of_the_h200s_size_is_not_credited():
    lead, fill, pass_us, commit, trip = 50.0, 1450.0, 4400.0, 3500.0, 300.0
    walls_b = [lead + fill + pass_us + commit + trip] * 4
    walls_c = [lead + pass_us + commit + trip] * 4  # the same pass, no fill
    verdict = corroborate(walls_b, [pass_us] * 4, walls_c, 10.0, 10.0 / 1.49, 0.05, 50.0,
                          [lead + commit] * 4, 765, [lead] * 4, [0.0] * 4)
    assert verdict.ok and verdict.resolved  # the claim of 1.49x is corroborated ...
    assert credit_cap(verdict, 0.05) <= 1.05  # ... and must not be credited


# ---- what the hole rests on: any element of the window's fill on its own --------------------------------------------

def test_any_element_of_the_windows_fill_is_computed_on_its_own():
    """The enabler of the attacks above: element ``i`` of a block filled with ``key`` is ``values(hashes(i // 2))``'s
    ``i % 2``-th, no other element needed. (A generator without random access would refuse the sparse filler; the
    dense in-kernel one would remain.)"""
    block = torch.empty((3, 4096), dtype=torch.float16)
    key = window_fill.key_of(1234, 1, "table")
    window_fill.fill(block, key, 0.5)
    idx = torch.tensor([0, 1, 4095, 4096, 9001, 12287])
    h = window_fill.hashes(torch.div(idx, 2, rounding_mode="floor"), key).gather(1, (idx % 2).unsqueeze(1)).squeeze(1)
    assert torch.equal(window_fill.values(h, 0.5, torch.float16), block.view(-1)[idx])


# ---- B. the commitments read in place: the oracle's integers are the judge's ---------------------------------------

def test_odd_outputs_hashed_in_place_give_the_judges_integers(monkeypatch):
    """Outputs the in-place path reads where they lie (runners/commit_blocks.py ``readable``) that are not fresh
    allocations: every slot's output the same tensor (a baseline returning one buffer), a slot's two outputs one
    tensor, an output that is the slot's input (an in-place entry's written input: runners/worker.py
    ``_with_written``), views at an 8-byte-aligned offset into a larger buffer, a leading size-1 dimension with any
    stride, and an empty output beside them: the plan's hashes, rows and position hashes are the copy path's and
    the judge's (``commitment_of``), and a change through an alias shows in every slot that reads it."""
    from test_commitments import _in_place_and_copied

    gen = torch.Generator().manual_seed(20)
    shared = torch.randn(8, 512, generator=gen).half()
    big = torch.randn(4 * 4096 + 64, generator=gen).half()
    inputs = [torch.randn(4096, generator=gen).half() for _ in range(4)]
    outputs = []
    for k in range(4):
        view = big[4 * k + k * 4096:4 * k + (k + 1) * 4096]  # 8 bytes past the previous view's end
        one_row = torch.randn(1, 4096, generator=gen).half().as_strided((1, 4096), (7, 1))
        outputs.append((shared, view, inputs[k], view, one_row, torch.empty(0, 16).half()))
    assert all(o[1].data_ptr() % 8 == 0 and o[1].data_ptr() % 256 for o in outputs[1:])
    plan, _ = _in_place_and_copied(monkeypatch, outputs, 41, 1 << 12)
    assert {p for p, _, _ in plan.in_place} >= {0, 1, 2, 3, 4}
    before = plan.hashes(7).tolist()
    shared[3, 100] += 1  # every slot's first output
    inputs[2][5] += 1  # slot 2's written input
    after = plan.hashes(7).tolist()
    assert after == [commitment_of(o, 7) for o in outputs]
    assert [a != b for a, b in zip(after, before)] == [True, True, True, True]
