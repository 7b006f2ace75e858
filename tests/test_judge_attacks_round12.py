"""Attacks on the judge, twelfth round: the openings of the judge's window under the design of round 11's close (the
digest covers the slots' hashes AND every output's chunk-level nodes (a block per shape), ``CommitPlan.rows``; the
judge computes an output's hash from its row, folds the numbers from what the wire carries, and compares the opened
chunks and numbers with the oracle's: runners/openings.py ``check_openings``, ``compare_chunks``).

Unit-level, on the openings themselves with tests/test_openings.py's helpers (``committed``, ``opened``, ``check``):
a worker's reply is what ``open_slots`` makes from the outputs it committed to, edited as a hostile worker would
edit it after the clock. Holes the judge lets through today are ``xfail(strict=True)`` with the mechanism and the
fix in the reason; what holds is asserted plainly.
"""
from __future__ import annotations

import importlib.util

import pytest
import torch
from conftest import CHEATS
from test_openings import TOL, check, committed, opened

from runners.commitments import _leaf_word
from runners.openings import OpeningError, compare_chunks
from runners.wire import leaf_meta


def _tol(dtype):
    return TOL


def _cheat(name: str):
    """A cheat's module imported outside a worker (no ``serve`` frame: nothing is hooked)."""
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), CHEATS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _refused(reply, commits, rows, slots, ref) -> str:
    """Why the judge refuses an opening ('' if it accepts it): check_openings, then compare_chunks."""
    try:
        got = check(reply, commits, rows, slots)
    except OpeningError as exc:
        return f"OpeningError: {exc}"
    return compare_chunks(got, ref, _tol)


def _counts(count: int = 8, seed: int = 0) -> list:
    """clip_count's outputs: the clipped tensor (dense: it has rows) and the count, an int."""
    g = torch.Generator().manual_seed(seed)
    outs = []
    for _ in range(count):
        x = 2 * torch.randn(512, generator=g)
        outs.append((x.clamp(-1.5, 1.5), int((x.abs() > 1.5).sum())))
    return outs


# ---- 1. a number shown in a list: its word is the list's type's ----------------------------------------------------

def test_a_number_skipped_in_the_timed_pass_and_shown_in_a_list_is_refused():
    """(Was a hole: a number's meta decoded to a list, whose word is one constant whatever it holds, and the
    comparison flattened it: a count skipped in the timed pass was shown right inside a list after the clock.) A
    number's meta must be a single leaf, and numbers are compared as numbers."""
    cheat = _cheat("round12_number_in_a_list.py")
    right = _counts()
    slots = list(range(len(right)))
    ref = check(*opened(right, slots), slots)
    # the timed pass skipped the count of slots 2 and 5: the commitment folds the placeholder's word
    timed = [(y, cheat.Deferred()) if k in (2, 5) else (y, n) for k, (y, n) in enumerate(right)]
    assert _leaf_word(cheat.Deferred()) == _leaf_word([right[2][1]]) == _leaf_word([0])
    reply, commits, rows = opened(timed, slots)
    assert _refused(reply, commits, rows, slots, ref)  # shown as it was committed: refused (not the oracle's count)
    for s in (2, 5):  # after the clock: the right counts, each in a one-element list
        cheat.show_in_a_list(reply, s, 1, right[s][1])
    assert _refused(reply, commits, rows, slots, ref), "a skipped count shown after the clock passed the openings"


def test_a_number_shown_as_a_placeholder_or_changed_after_the_clock_is_refused():
    """Held: the placeholder itself (kind 'other') compares equal to nothing, and a plain number other than the one
    committed misses the slot's hash."""
    right = _counts(4)
    slots = [0, 1, 2, 3]
    ref = check(*opened(right, slots), slots)
    reply, commits, rows = opened(right, slots)
    reply["numbers"]["1"]["1"] = {"kind": "other", "type": "list"}
    assert _refused(reply, commits, rows, slots, ref).startswith("OpeningError")
    timed = [(y, 0) if k == 1 else (y, n) for k, (y, n) in enumerate(right)]
    reply, commits, rows = opened(timed, slots)
    reply["numbers"]["1"]["1"] = leaf_meta(right[1][1])
    assert "not the ones committed to" in _refused(reply, commits, rows, slots, ref)


# ---- 2. complex outputs: committed, opened, never compared --------------------------------------------------------

def test_a_stale_complex_output_in_an_opened_slot_is_refused():
    """(Was a hole: complex chunks, and any dtype wider than 8 bytes, were opened but not compared.) Compared byte for
    byte now, as compare_tensor compares complex tensors."""
    g = torch.Generator().manual_seed(2)
    right = [(torch.randn(256, generator=g, dtype=torch.complex64),) for _ in range(6)]
    stale = list(right)
    stale[4] = (torch.randn(256, generator=g, dtype=torch.complex64),)  # slot 4: an earlier pass's outputs
    slots = list(range(6))
    ref = check(*opened(right, slots), slots)
    reply, commits, rows = opened(stale, slots)
    assert sorted(rows) == [(0, 0)]  # it has rows, the digest covers them: the stale chunks climb to their nodes
    assert _refused(reply, commits, rows, slots, ref).startswith("slot 4")


# ---- 3. an output whose shape follows a range scalar: a block of rows per shape (was: no rows at any size) --------

def test_a_stale_output_whose_shape_follows_a_range_scalar_is_refused():
    """Was a hole (round 12): runners/inputs.py SlotBank gives a range scalar up to four values across the window's
    slots, so an output whose shape follows it (top-k's k, a slice's length) differed in shape between slots and
    CommitPlan kept rows only for a column of one shape: nothing of it was opened, and a candidate skipping its calls
    in a share of the slots was seen only by the 16 slots a round shown in full. Now each (shape, dtype) of such a
    column is a block of its own slots with its own rows, covered by the digest, opened and held to the oracle's."""
    g = torch.Generator().manual_seed(3)
    lengths = [64, 512, 200, 333]  # a range scalar's four values, slot k at k % 4
    right = [(torch.randn(lengths[k % 4], generator=g),) for k in range(12)]
    stale = list(right)
    stale[5] = (torch.randn(lengths[1], generator=g),)
    slots = list(range(12))
    ref = check(*opened(right, slots), slots)
    reply, commits, rows = opened(stale, slots)
    assert sorted(rows) == [(0, 0), (0, 1), (0, 2), (0, 3)]  # one block per length, keyed by its first slot
    assert [rows[(0, f)][3] for f in range(4)] == [(0, 4, 8), (1, 5, 9), (2, 6, 10), (3, 7, 11)]
    assert _refused(reply, commits, rows, slots, ref).startswith("slot 5")
    plan, _, _, _ = committed(right)
    reply, commits, rows = opened(stale, slots, plan=plan)  # the right outputs committed to, the stale shown
    assert "not the one committed to" in _refused(reply, commits, rows, slots, ref)


# ---- 4. what holds ------------------------------------------------------------------------------------------------

def test_a_level_zero_chunk_computed_after_the_clock_misses_its_node():
    """Held: small outputs have rows at level 0 (the words themselves are the nodes): a right word shown against a
    stale row committed to misses it."""
    right = _counts(6)
    stale = list(right)
    stale[3] = _counts(1, seed=9)[0]
    slots = list(range(6))
    plan, _, rows, _ = committed(stale)
    assert rows[(0, 0)][0] == 0
    reply, commits, rows = opened(right, slots, plan=plan)
    reply["numbers"]["3"]["1"] = leaf_meta(stale[3][1])  # the committed count: only the chunk is the right one
    assert "not the one committed to" in _refused(reply, commits, rows, slots, check(*opened(right, slots), slots))


def test_a_free_trailing_hash_or_a_number_where_the_oracle_has_a_tensor_is_refused():
    """Held: a longer list of hashes (a free word folded last) misses the slot's hash without a solver of the node
    for its RIGHT word (rounds 10 and 11 solved it for the left one); a number where the oracle's output is a tensor
    without rows is one the baseline does not return."""
    right = _counts(4)
    slots = [0, 1, 2, 3]
    ref = check(*opened(right, slots), slots)
    reply, commits, rows = opened(right, slots)
    reply["hs"]["2"] = reply["hs"]["2"] + [12345]
    assert "slot 2: its outputs are not the ones committed to" in _refused(reply, commits, rows, slots, ref)
    g = torch.Generator().manual_seed(4)
    # output 0: no rows (a tensor in three slots, a number in the fourth: hashed slot by slot)
    varied = [(torch.randn(10 + k, generator=g), 1) for k in range(3)] + [(5, 1)]
    vref = check(*opened(varied, slots), slots)
    reply, commits, rows = opened(varied, slots)
    assert not rows
    reply["numbers"]["0"]["0"] = leaf_meta(7)
    reply["hs"]["0"][0] = _leaf_word(7)
    assert "baseline does not return" in _refused(reply, commits, rows, slots, vref) or \
        _refused(reply, commits, rows, slots, vref).startswith("OpeningError")


@pytest.mark.parametrize("edit", [
    lambda r: r.update(groups=[1]),
    lambda r: r["groups"][0].update(position=[0]),
    lambda r: r["numbers"]["0"].update({"\u00b2": {"kind": "none"}}),
])
def test_a_malformed_opening_is_an_opening_error(edit):
    """(Was raised as AttributeError, TypeError or ValueError: the sandbox refused as 'crashed'.) A refusal at timing."""
    right = _counts(2)
    reply, commits, rows = opened(right, [0, 1])
    edit(reply)
    with pytest.raises(OpeningError):
        check(reply, commits, rows, [0, 1])


# ---- 5. through the judge: an output whose shape follows a range scalar -------------------------------------------

_HEAD_SCALE = '''"""Twice the first n columns of each row."""
import torch
import triton
import triton.language as tl


@triton.jit
def _head_scale_kernel(x_ptr, out_ptr, stride_x, stride_out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_out + offs, x * 2.0, mask=mask)


def head_scale(x, n):
    rows, width = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _head_scale_kernel[(rows,)](x, out, x.stride(0), out.stride(0), n, BLOCK=triton.next_power_of_2(width))
    return out
'''


@pytest.fixture(scope="module")
def ranged_runs(tmp_path_factory) -> dict:
    """The baseline and the skipper (tests/cheats/round12_skips_a_ranged_output.py: stale outputs in slots 6-11 of
    every pass) at a secret whose full reveals show only slots 0-5, on the timed CPU stand-in: 12 window slots, the
    range scalar's four values three slots each."""
    from test_judge_attacks_round4 import _timed_judge
    from test_judge_attacks_round7 import one_module_bundle
    from test_judge_attacks_round10 import _seeds_showing_only
    from test_judge_attacks_round16 import CLOCK_ASIDE  # the control's subject is the openings, not the clock

    from runners.task import ArgSpec, Case

    bundle = one_module_bundle(tmp_path_factory.mktemp("r12-head"), "ops/head_scale.py", _HEAD_SCALE,
                               kernel="head_scale", entry="head_scale",
                               args=[ArgSpec("x", shape=["T", "H"]), ArgSpec("n", range=[1, 256])],
                               cases=[Case(symbols={"T": 4, "H": 256}, dtype="float32")])
    seed = _seeds_showing_only(set(range(6)), want=1)[0]
    numbers = {"max_slots": 12, "max_window_slots": 12, "reveal_slots": 2}
    runs = _timed_judge(bundle, tmp_path_factory.mktemp("r12-timed"),
                        [(_HEAD_SCALE, "verify", seed, {**numbers, **CLOCK_ASIDE}),
                         ((CHEATS / "round12_skips_a_ranged_output.py").read_text(), "verify", seed, numbers)],
                        {"T": 4, "H": 256})
    return dict(zip(["baseline", "skipper"], runs))


def test_a_skipper_of_calls_whose_output_follows_a_range_scalar_is_refused_by_the_openings(ranged_runs):
    import json

    assert ranged_runs["baseline"]["ok"], json.dumps(ranged_runs["baseline"])  # honest blocks open and agree
    ev = ranged_runs["skipper"]
    assert not ev["ok"] and ev["stage"] == "timing" and "opened chunk" in ev["error"], json.dumps(ev)
