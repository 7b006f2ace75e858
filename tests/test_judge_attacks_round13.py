"""Attacks on the judge, thirteenth round: the openings of the judge's window once an output whose shape follows a
range scalar is hashed as one block of rows per (shape, dtype), each block naming its slots, keyed (position, first
slot), the candidate's blocks held to the oracle's (runners/commitments.py ``CommitPlan``, runners/openings.py
``opened_in``, ``check_openings``, runners/judge_clock.py ``_window_hashes`` and the check in ``_corroborate``).

Unit-level as in round 12 (a worker's reply made by ``open_slots`` from the outputs it committed to, edited as a
hostile worker would edit it after the clock; tests/test_openings.py's helpers), plus ``_window_hashes`` on a judge
of its own (no workers: a reply's files in a folder of the test's) and one run through the judge on the timed CPU
stand-in. Holes the judge lets through today are ``xfail(strict=True)`` with the mechanism and the fix in the
reason; what holds is asserted plainly.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from conftest import CHEATS
from test_openings import KEY, SEED, TOL, _plain, check, opened

from runners.commitments import CommitPlan, _padded_words, digest
from runners.compare import compare_outputs, output_scales, scale_ratios
from runners.inputs import SCALE_LOG10, SlotBank
from runners.judge_clock import TimingSteps
from runners.openings import OpeningError, check_openings, chunk_indices, compare_chunks
from runners.protocol import Protocol, Refusal
from runners.task import ArgSpec, Case, Tolerance
from runners.wire import WireError, decode_value, encode_value


def _tol(dtype):
    return TOL


def _refused(reply, commits, rows, slots, ref, tol=_tol) -> str:
    """Why the judge refuses an opening ('' if it accepts it): check_openings, then compare_chunks."""
    try:
        got = check(reply, commits, rows, slots)
    except OpeningError as exc:
        return f"OpeningError: {exc}"
    return compare_chunks(got, ref, tol)


LENGTHS = [64, 512, 200, 333]  # a range scalar's four values, slot k at k % 4 (runners/inputs.py SlotBank)


def _ranged(count: int = 12, seed: int = 3, lengths=LENGTHS) -> list:
    """Outputs whose shape follows a range scalar: (y of length lengths[k % 4], a count) per slot."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(lengths[k % len(lengths)], generator=g), k) for k in range(count)]


# ---- a judge of its own for _window_hashes: the reply's files in a folder of the test's -----------------------------

class _Worker:
    def __init__(self, outbox):
        self.outbox = outbox


def _judge(outbox) -> tuple[TimingSteps, _Worker]:
    steps = TimingSteps.__new__(TimingSteps)
    worker = _Worker(outbox)
    steps.candidate, steps.oracle = worker, None
    return steps, worker


def _revealed(outs: list, box) -> tuple[dict, int]:
    """What runners/worker.py ``reveal`` sends of a window's commitments (the per-slot hashes and the rows of nodes,
    files in ``box``) and the digest the worker sent when its pass ended."""
    plan = CommitPlan(outs)
    hashes = plan.hashes(KEY)
    root = digest(hashes, KEY, [r[3] for r in plan.rows])
    reply = {"commitments": encode_value(box, "commitments", hashes),
             "rows": [{"position": p, "level": j, "nbytes": n, "slots": list(m) if m else None,
                       "nodes": encode_value(box, f"rows{p}-{i}", nodes)}
                      for i, (p, j, n, nodes, m) in enumerate(plan.rows)]}
    return reply, root


# ---- 1. the blocks themselves: slots, keys, order ---------------------------------------------------------------

def test_an_honest_ranged_window_reads_back_block_by_block(tmp_path):
    steps, worker = _judge(tmp_path)
    outs = _ranged()
    reply, root = _revealed(outs, tmp_path)
    commits, rows, _ = steps._window_hashes(worker, reply, len(outs), KEY, root)
    assert sorted(rows) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert [rows[(0, f)][3] for f in range(4)] == [(0, 4, 8), (1, 5, 9), (2, 6, 10), (3, 7, 11)]


@pytest.mark.parametrize("members", [
    [], [1, 1, 5], [5, 1, 9], [1, 5, 12], [-1, 5, 9], [True, 5, 9], [1.0, 5, 9], "159", {"1": 5}, [1, 5, [9]],
])
def test_a_block_whose_slots_are_not_distinct_slots_in_order_is_refused(tmp_path, members):
    """Held: empty, duplicate, unsorted, out of range or non-integer slots of a block are a WireError, a refusal at
    timing (and the nodes must have a row per slot named)."""
    steps, worker = _judge(tmp_path)
    reply, root = _revealed(_ranged(), tmp_path)
    reply["rows"][1]["slots"] = members
    with pytest.raises(Refusal) as info:
        steps._window_hashes(worker, reply, 12, KEY, root)
    assert info.value.stage == "timing"


@pytest.mark.parametrize("edit", [
    lambda rows: rows[1].update(slots=None),  # one block for every slot: 3 rows of nodes where 12 are named
    lambda rows: rows[1].update(slots=[1, 5]),  # fewer slots than rows
    lambda rows: rows.append(dict(rows[1])),  # a block twice (the same key)
    lambda rows: rows[2].update(slots=[1, 6, 10]),  # another block's key, its own rows: the same key twice
    lambda rows: rows[1].update(level=1),  # the nodes of another level
])
def test_a_block_named_twice_or_whose_rows_do_not_fit_its_slots_is_refused(tmp_path, edit):
    steps, worker = _judge(tmp_path)
    reply, root = _revealed(_ranged(), tmp_path)
    edit(reply["rows"])
    with pytest.raises(Refusal):
        steps._window_hashes(worker, reply, 12, KEY, root)


def test_a_stale_slot_taken_out_of_its_block_after_the_clock_is_still_refused(tmp_path):
    """The digest covers the nodes' bytes, not the blocks' names (level, size, slots): a worker can re-cut its rows
    after the clock as long as the bytes and their order stay (here block (0, 1)'s three rows of 256 words, slots
    1, 5, 9, shown as two rows of 384 words for slots 1 and 9: slot 5, stale, in no block). ``_window_hashes``
    accepts it; the judge's hold of the candidate's blocks to the oracle's refuses it (runners/judge_clock.py
    ``_corroborate``; through the judge: section 5), and so do the openings by themselves: slot 5's output is
    missing against the oracle's chunks and slots 1 and 9 climb to hashes that were not committed."""
    steps, worker = _judge(tmp_path)
    right = _ranged()
    stale = list(right)
    stale[5] = (torch.randn(512, generator=torch.Generator().manual_seed(9)), 5)
    slots = list(range(12))
    ref = check(*opened(right, slots), slots)
    reply, root = _revealed(stale, tmp_path)
    block = reply["rows"][1]
    nodes = decode_value(block["nodes"], tmp_path, 1 << 20)
    assert block["slots"] == [1, 5, 9] and tuple(nodes.shape) == (3, 256)
    block.update(slots=[1, 9], nbytes=8 * 384, nodes=encode_value(tmp_path, "recut", nodes.reshape(2, 384)))
    commits, rows, _ = steps._window_hashes(worker, reply, 12, KEY, root)  # the same digest: accepted here
    assert rows[(0, 1)][3] == (1, 9)
    answer = opened(stale, slots)[0]  # the re-cut block's chunks: level 0, the nodes themselves, as the seed draws
    recut = nodes.reshape(2, 384)
    idx = torch.tensor([chunk_indices(SEED, s, 0, 384, 2) for s in (1, 9)])
    answer["groups"][1].update(slots=[1, 9], nbytes=8 * 384, words=torch.gather(recut, 1, idx).unsqueeze(-1))
    assert "slot 1: its outputs are not the ones committed to" in _refused(answer, commits, rows, slots, ref)


def test_a_number_where_a_block_has_rows_is_refused():
    """Held: an opened slot's output inside a block is the judge's to hash (from its row); a number shown there too
    is an OpeningError, whichever block."""
    outs = _ranged()
    slots = [1, 2, 7]
    for s in slots:
        reply, commits, rows = opened(outs, slots)
        reply["numbers"][str(s)]["0"] = {"kind": "scalar", "value": 1.0}
        with pytest.raises(OpeningError, match="at a place it has none"):
            check(reply, commits, rows, slots)


@pytest.mark.parametrize("edit", [
    lambda gs: gs[0].update(first=gs[1]["first"]),  # a group keyed by another block's first slot
    lambda gs: gs[0].update(slots=gs[1]["slots"]),  # another block's slots under its own key
    lambda gs: (gs[0].update(first=gs[1]["first"], slots=gs[1]["slots"]),
                gs[1].update(first=gs[0]["first"], slots=gs[0]["slots"])),  # two blocks' keys swapped
    lambda gs: gs[1].update(first=True),  # a key that is not an int
    lambda gs: gs[1].update(slots=gs[1]["slots"][::-1]),  # the block's slots out of order
    lambda gs: gs[1].update(nbytes=gs[0]["nbytes"]),  # another block's size
    lambda gs: gs.append(dict(gs[2], slots=[gs[2]["slots"][0]], words=gs[2]["words"][:1])),  # one slot twice
])
def test_a_group_under_another_blocks_key_or_slots_is_refused(edit):
    outs = _ranged()
    slots = [0, 1, 2, 5, 6, 11]
    reply, commits, rows = opened(outs, slots)
    edit(reply["groups"])
    with pytest.raises(OpeningError):
        check(reply, commits, rows, slots)


# ---- 2. the budget: blocks counted as columns ---------------------------------------------------------------------

def _window_count(args: list, symbols: dict, dtype: str = "float32") -> int:
    """The slots of the judge's window at a case (runners/judge_clock.py ``_slot_count``, the verify protocol)."""
    steps = TimingSteps.__new__(TimingSteps)
    steps.spec = SimpleNamespace(args=args)
    p = Protocol()
    return steps._slot_count(Case(symbols=symbols, dtype=dtype), p.window_us, p.window_bytes, p.max_window_slots)


def _range_values(args: list, count: int) -> list:
    """The range scalar's value in each of ``count`` window slots (SlotBank: the same draws whatever the shapes, so
    the bank is made at a size of one element)."""
    return [s["n"] for s in SlotBank(args, Case(symbols={"T": 1, "H": 1}, dtype="float32"), "cpu", count).slots]


HEAD_SUM = [ArgSpec("x", shape=["T", "H"]), ArgSpec("n", range=[1, 1024])]  # the sums of x's first n columns


# Was a hole (round 13, closed as it ran): CommitPlan divides the rows' budget by the plan's BLOCKS
# (node_level(nbytes, self.count, blocks)) while each block holds only its own slots: an output that follows a range
# scalar (4 blocks) gets a quarter of the nodes per row that it would get unranged, and at mid sizes (here x of
# 1024x1024 float32: 768 window slots, allowed 65536 // (768 * 4) = 21 nodes a row) its blocks of n = 157, 764, 1024
# get no level at all: three quarters of the slots are never opened (the oracle's plan has no rows there, so neither
# may the candidate's) and a skipper of those calls is seen only by the 16 slots a round shown in full. Fixed:
# runners/commitments.py CommitPlan.__init__: node_level(g[2], self.count, columns) with columns = the number of
# 'tensors' columns (a column's blocks together hold count rows, so the window stays within ROW_BUDGET_WORDS)
def test_a_ranged_output_at_a_mid_size_window_is_opened_in_every_slot():
    count = _window_count(HEAD_SUM, {"T": 1024, "H": 1024})
    assert count == 768
    ns = _range_values(HEAD_SUM, count)
    g = torch.Generator().manual_seed(5)
    right = [(torch.randn(n, generator=g),) for n in ns]
    flat = CommitPlan([(torch.zeros(1024),) for _ in range(count)])  # the same window, one length: rows
    flat.hashes(KEY)
    assert [r[1] for r in flat.rows] == [3]  # 64 nodes a row of 512 words
    skipped = [k for k, n in enumerate(ns) if n == 1024][:6]  # six of the costliest calls, stale
    stale = list(right)
    for k in skipped:
        stale[k] = (torch.randn(1024, generator=g),)
    slots = list(range(count))  # every slot opened (up to 1024)
    ref = check(*opened(right, slots), slots)
    reply, commits, rows = opened(stale, slots)
    assert _refused(reply, commits, rows, slots, ref).startswith(f"slot {skipped[0]}")


# Was a hole (round 13, closed as it ran): the same division by blocks takes rows from the OTHER outputs of a plan
# with a ranged one: at 768 slots an output of 1024 floats (its shape fixed, 512 words) has rows alone (allowed 85
# nodes a row: level 3, 64 nodes) and none beside a ranged output (5 blocks: allowed 17, where its highest exact level
# has 32), so a call skipped there is opened in neither output (with the fix: 2 columns, allowed 42, level 4). Fixed:
# runners/commitments.py CommitPlan.__init__: divide the budget by the tensor columns, not the blocks
def test_an_output_beside_a_ranged_one_keeps_its_rows():
    count = _window_count(HEAD_SUM, {"T": 1024, "H": 1024})
    ns = _range_values(HEAD_SUM, count)
    g = torch.Generator().manual_seed(6)
    alone = CommitPlan([(torch.randn(1024, generator=g),) for _ in range(count)])
    alone.hashes(KEY)
    assert [(r[0], r[1]) for r in alone.rows] == [(0, 3)]
    both = CommitPlan([(torch.randn(n, generator=g), torch.randn(1024, generator=g)) for n in ns])
    both.hashes(KEY)
    assert 1 in {r[0] for r in both.rows}, "the fixed-shape output lost its rows to its ranged sibling"


# ---- 3. malformed replies: a refusal at timing, never another exception ------------------------------------------

# Was a hole (round 13, closed as it ran): runners/judge_clock.py _window_hashes iterates reply['rows'] and calls
# row.get(...) without checking that it is a list of objects: 5, 'x', [1], [None] or a bare object raise
# AttributeError/TypeError out of the judge (the sandbox's 'crashed', not a refusal at timing). Fixed:
# _window_hashes: rows = reply.get('rows') or []; if not isinstance(rows, list) or not all(isinstance(r, dict) for r
# in rows): raise WireError('the rows of nodes are not a list of rows'), before the loop
@pytest.mark.parametrize("rows", [5, "x", [1], [None], {"position": 0}])
def test_rows_that_are_not_a_list_of_rows_are_refused_at_timing(tmp_path, rows):
    steps, worker = _judge(tmp_path)
    reply, root = _revealed(_ranged(), tmp_path)
    reply["rows"] = rows
    try:
        steps._window_hashes(worker, reply, 12, KEY, root)
    except Refusal as exc:
        assert exc.stage == "timing"
    except Exception as exc:  # noqa: BLE001 - the hole: any other exception
        raise AssertionError(f"{type(exc).__name__}: {exc}") from exc


# Was a hole (round 13, closed as it ran): runners/wire.py _check_header looks the header's dtype up with
# DTYPES.get(meta.get('dtype')): a list or an object there (JSON allows it) raises TypeError (unhashable), through
# _window_hashes (a row's nodes), check_openings (a group's words) and every other tensor the judge reads from a
# worker: 'crashed', not a refusal. Fixed: runners/wire.py _check_header: dtype = DTYPES.get(meta.get('dtype')) if
# isinstance(meta.get('dtype'), str) else None
@pytest.mark.parametrize("where", ["rows", "words"])
def test_a_tensor_header_with_an_unhashable_dtype_is_refused_at_timing(tmp_path, where):
    steps, worker = _judge(tmp_path)
    outs = _ranged()
    slots = [0, 1, 2, 3]
    try:
        if where == "rows":
            reply, root = _revealed(outs, tmp_path)
            reply["rows"][0]["nodes"]["dtype"] = ["int64"]
            steps._window_hashes(worker, reply, 12, KEY, root)
        else:
            reply, commits, rows = opened(outs, slots)
            reply["groups"][0]["words"] = dict(encode_value(tmp_path, "words", reply["groups"][0]["words"]),
                                               dtype={"int64": 1})
            check_openings(reply, lambda meta, most: decode_value(meta, tmp_path, most), commits, rows, slots,
                           SEED, 2, KEY)
    except (Refusal, OpeningError, WireError):
        return
    except Exception as exc:  # noqa: BLE001 - the hole: any other exception
        raise AssertionError(f"{type(exc).__name__}: {exc}") from exc
    raise AssertionError("accepted")


@pytest.mark.parametrize("edit", [
    lambda r: r["groups"][1].update(slots=None),
    lambda r: r["groups"][1].update(slots="1"),
    lambda r: r["groups"][1].update(position=0.0),
    lambda r: r["groups"][1].update(words={"kind": "seq", "items": []}),
    lambda r: r["groups"][1].update(words={"kind": "tensor", "dtype": "int64", "shape": [1], "nbytes": 8}),
    lambda r: r["groups"][1].update(words=r["groups"][1]["words"].float()),
    lambda r: r["groups"][1].update(words=r["groups"][1]["words"][:, :1]),
    lambda r: r["hs"].update({"1": r["hs"]["1"][:0]}),  # no output 0 where a block has its row
    lambda r: r["hs"].update({"1": [2**63] + r["hs"]["1"][1:]}),
    lambda r: r["numbers"]["2"].update({"-1": {"kind": "none"}}),
    lambda r: r["numbers"]["2"].update({"1": {"kind": "scalar", "value": [2]}}),
    lambda r: r["numbers"]["2"].update({"1": {"kind": "map", "items": {}}}),
    lambda r: r.update(groups={"0": 1}),
])
def test_a_malformed_ranged_opening_is_an_opening_error(tmp_path, edit):
    """Held (and a random search over such edits, 20 000 of them, raised nothing else)."""
    outs = _ranged()
    slots = [0, 1, 2, 5]

    def decode(meta, most):
        return _plain(meta, most) if isinstance(meta, torch.Tensor) else decode_value(meta, tmp_path, most)

    reply, commits, rows = opened(outs, slots)
    edit(reply)
    with pytest.raises((OpeningError, WireError)):
        check_openings(reply, decode, commits, rows, slots, SEED, 2, KEY)


# ---- 4. the chunks' comparison at a small window scale ------------------------------------------------------------

def _compare_at_scale(got, ref, tol, first_scales, shown_refs) -> str:
    """compare_chunks as the judge calls it: with each output's scale against the case's first trial, from the slots
    shown in full (runners/judge_clock.py _corroborate)."""
    return compare_chunks(got, ref, tol, scale_ratios(shown_refs, first_scales))


# Was a hole (round 13, closed as it ran): compare_chunks held an opened chunk element by element only; the judge's
# window draws one input scale a round down to 1e-3 (runners/inputs.py SlotBank.fill), where a linear op's bfloat16
# outputs all sit under atol (1e-2): an output written as zeros passed every opened chunk, while the same slot shown
# in full was refused by compare_outputs's whole-output check (round 8's fix). Fixed: the judge takes each output's
# scale against the case's first trial from the slots shown in full (runners/compare.py scale_ratios), and below 1
# holds each opened chunk's whole error to its size (first_bad_row).
def test_an_output_zeroed_under_the_tolerance_at_a_small_window_scale_is_refused_by_the_openings():
    bf16 = Tolerance(atol=1e-2, rtol=1.6e-2)  # runners/task.py's bfloat16 default
    g = torch.Generator().manual_seed(8)
    first = [(torch.randn(8, 512, generator=g) * 2).bfloat16()]  # trial 0: the op (2x) at the spec's scale
    first_scales = output_scales(first)
    low = 10 ** SCALE_LOG10[0]
    right = [((torch.randn(8, 512, generator=g) * low * 2).bfloat16(),) for _ in range(8)]
    cheat = list(right)
    for k in (3, 4, 5, 6):  # half the window's calls skipped their reads: zeros
        cheat[k] = (torch.zeros_like(right[k][0]),)
    assert not compare_outputs(cheat[4], right[4], lambda dtype: bf16, first_scales).ok  # shown in full: refused
    slots = list(range(8))
    ref = check(*opened(right, slots), slots)
    got = check(*opened(cheat, slots), slots)
    shown = [right[0], right[7]]  # the slots shown in full this round: the oracle's whole outputs
    assert _compare_at_scale(got, ref, lambda dtype: bf16, first_scales, shown).startswith("slot 3")
    assert _compare_at_scale(ref, ref, lambda dtype: bf16, first_scales, shown) == ""
    near = [((r[0].float() * (1 + 2 ** -8)).bfloat16(),) for r in right]  # an honest kernel's rounding: accepted
    assert _compare_at_scale(check(*opened(near, slots), slots), ref, lambda dtype: bf16, first_scales, shown) == ""


# ---- 5. through the judge: a skipper of one range value that keeps no rows for it ------------------------------

@pytest.fixture(scope="module")
def one_value_run(tmp_path_factory) -> dict:
    """tests/cheats/round13_skips_one_range_value.py (stale outputs at n == 256: slots 1, 5 and 9 of 12, no rows
    for that shape) at a secret whose full reveals never show those slots, on the timed CPU stand-in."""
    from test_judge_attacks_round4 import _timed_judge
    from test_judge_attacks_round7 import one_module_bundle
    from test_judge_attacks_round10 import _seeds_showing_only
    from test_judge_attacks_round12 import _HEAD_SCALE

    args = [ArgSpec("x", shape=["T", "H"]), ArgSpec("n", range=[1, 256])]
    assert [s["n"] for s in SlotBank(args, Case(symbols={"T": 4, "H": 256}, dtype="float32"), "cpu", 12).slots][
        1::4] == [256, 256, 256]
    bundle = one_module_bundle(tmp_path_factory.mktemp("r13-head"), "ops/head_scale.py", _HEAD_SCALE,
                               kernel="head_scale", entry="head_scale", args=args,
                               cases=[Case(symbols={"T": 4, "H": 256}, dtype="float32")])
    seed = _seeds_showing_only(set(range(12)) - {1, 5, 9}, want=1)[0]
    numbers = {"max_slots": 12, "max_window_slots": 12, "reveal_slots": 2}
    (run,) = _timed_judge(bundle, tmp_path_factory.mktemp("r13-timed"),
                          [((CHEATS / "round13_skips_one_range_value.py").read_text(), "verify", seed, numbers)],
                          {"T": 4, "H": 256})
    return run


def test_a_skipper_of_one_range_value_without_rows_for_it_is_refused_by_the_baselines_blocks(one_value_run):
    """Held: nothing of the skipped slots can be opened (the candidate's plan kept no rows for their shape) and the
    full reveals miss them; the judge refuses because the candidate's blocks are not the oracle's. (With that check
    taken out of runners/judge_clock.py ``_corroborate``, tried on a scratch copy, compare_chunks refuses it as well:
    the oracle's chunks of slot 1 meet none of the candidate's.)"""
    ev = one_value_run
    assert not ev["ok"] and ev["stage"] == "timing" and "rows of nodes committed to" in ev["error"], json.dumps(ev)


def test_a_window_with_a_ranged_output_stays_within_its_rows_budget():
    """Held, and with section 2's fix too (tried on a scratch copy): per column, its blocks together hold ``count``
    rows of at most ``allowed`` nodes, so the window's rows stay within ROW_BUDGET_WORDS."""
    from runners.commitments import ROW_BUDGET_WORDS

    outs = [(torch.zeros(n), torch.zeros(7)) for n in _range_values(HEAD_SUM, 512)]
    plan = CommitPlan(outs)
    plan.hashes(KEY)
    assert sum(r[3].numel() for r in plan.rows) <= ROW_BUDGET_WORDS
    assert all(r[3].shape[1] == _padded_words(r[2]) >> r[1] for r in plan.rows)
