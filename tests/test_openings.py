"""The window's openings (runners/openings.py): chunks of every opened slot's outputs with their hash-tree paths,
checked by the judge up to the commitments sent when the pass ended. A worker that skipped a slot can show neither
the stale chunk (wrong against the oracle's) nor a right one computed after the clock (its path misses the committed
hash). The judge's own use, against a cheat that skips slots: tests/test_judge_attacks_round4.py, section 5."""
from __future__ import annotations

import pytest
import torch

from runners import hash_tree
from runners.commitments import commitments
from runners.openings import (OpeningError, check_openings, chunk_indices, chunk_level, compare_chunks, open_slots,
                              widths)
from runners.task import Tolerance

KEY, SEED = 0x5EED_1234, 77
TOL = Tolerance(atol=1e-3, rtol=1e-3)


def _plain(meta, most):
    """The judge's decode when nothing crosses a wire (the worker's tensors as they are)."""
    assert not isinstance(meta, torch.Tensor) or meta.numel() * meta.element_size() <= most
    return meta


def _slots(count: int = 6, seed: int = 0) -> list:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(3, 700, generator=g).half(), torch.randn(5, generator=g), 7) for _ in range(count)]


def test_an_honest_worker_opens_every_slot_and_each_chunk_is_the_outputs_own_bytes():
    outs = _slots()
    slots = [0, 2, 5]
    found = check_openings(open_slots(outs, slots, SEED, 2, KEY), _plain, commitments(outs, KEY), slots, SEED, 2, KEY)
    assert sorted(found) == [(s, p) for s in slots for p in (0, 1, 2)]
    assert all(found[(s, 2)] == {"value": 7} for s in slots)  # a number: what the wire carries, hashed to its word
    for (s, p), got in found.items():
        if p == 2:
            continue
        raw = outs[s][p].contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        assert got["nbytes"] == len(raw) and sorted(got["chunks"]) == chunk_indices(SEED, s, p, len(raw), 2)
        size = 8 << chunk_level(len(raw))
        for index, data in got["chunks"].items():
            assert data == raw[index * size:(index + 1) * size]
    assert compare_chunks(found, found, lambda dtype: TOL) == ""


@pytest.mark.parametrize("make", [
    lambda g: torch.randn(1, generator=g),  # one element: half a word
    lambda g: torch.randn(3, generator=g).half(),  # 6 bytes
    lambda g: torch.empty(0),
    lambda g: torch.randn(40, 33, generator=g).t(),  # strided: hashed as its logical order
    lambda g: torch.randint(0, 9, (257,), generator=g, dtype=torch.int32),
    lambda g: torch.rand(70, generator=g) > 0.5,
    lambda g: torch.randn(8192, generator=g),  # 4096 words: chunks of 32 words, 12 levels above them
])
def test_every_size_and_dtype_opens_and_verifies(make):
    g = torch.Generator().manual_seed(1)
    outs = [make(g) for _ in range(3)]
    found = check_openings(open_slots(outs, [0, 1, 2], SEED, 3, KEY), _plain, commitments(outs, KEY), [0, 1, 2],
                           SEED, 3, KEY)
    for s in range(3):
        raw = outs[s].contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        size = 8 << chunk_level(len(raw))
        assert all(d == raw[i * size:(i + 1) * size] for i, d in found[(s, 0)]["chunks"].items())
    assert len(widths(8 * 4096)) - 1 - chunk_level(8 * 4096) == 7  # 4096 words: 128 chunks, 7 levels above them


def test_a_skipped_slot_can_show_neither_its_stale_outputs_nor_right_ones_computed_after_the_clock():
    right = _slots()
    stale = list(right)
    stale[4] = _slots(1, seed=9)[0]  # slot 4 kept an earlier pass's outputs
    committed = commitments(stale, KEY)  # what the worker committed to when the pass ended
    slots = list(range(6))
    ref = check_openings(open_slots(right, slots, SEED, 2, KEY), _plain, commitments(right, KEY), slots, SEED, 2, KEY)
    # 1. it opens what it committed to: the paths hold, the stale chunk is wrong against the oracle's
    shown = check_openings(open_slots(stale, slots, SEED, 2, KEY), _plain, committed, slots, SEED, 2, KEY)
    assert compare_chunks(shown, ref, lambda dtype: TOL).startswith("slot 4: ")
    # 2. it computes slot 4 now and opens the right outputs: their hashes do not fold to the committed one
    with pytest.raises(OpeningError, match="slot 4: its outputs' hashes do not fold"):
        check_openings(open_slots(right, slots, SEED, 2, KEY), _plain, committed, slots, SEED, 2, KEY)
    # 3. it keeps the committed hashes and paths and puts the right chunks in: they do not climb to them
    forged = open_slots(stale, slots, SEED, 2, KEY)
    honest = open_slots(right, slots, SEED, 2, KEY)
    for f, h in zip(forged["groups"], honest["groups"]):
        f["words"] = h["words"]
    with pytest.raises(OpeningError, match="does not reach"):
        check_openings(forged, _plain, committed, slots, SEED, 2, KEY)


def test_what_the_judge_did_not_ask_for_or_a_malformed_opening_is_refused():
    outs = _slots(3)
    committed = commitments(outs, KEY)
    good = open_slots(outs, [0, 1, 2], SEED, 2, KEY)
    with pytest.raises(OpeningError, match="missing"):  # a slot left out
        check_openings({**good, "hs": {k: v for k, v in good["hs"].items() if k != "1"}}, _plain, committed,
                       [0, 1, 2], SEED, 2, KEY)
    other = open_slots(outs, [0, 1, 2], SEED + 1, 2, KEY)  # chunks of its own choosing (another seed)
    with pytest.raises(OpeningError, match="does not reach|wrong form"):
        check_openings(other, _plain, committed, [0, 1, 2], SEED, 2, KEY)
    bad = open_slots(outs, [0, 1, 2], SEED, 2, KEY)
    bad["groups"][0]["path"] = bad["groups"][0]["path"][..., :-1]
    with pytest.raises(OpeningError, match="wrong form"):
        check_openings(bad, _plain, committed, [0, 1, 2], SEED, 2, KEY)
    bad = open_slots(outs, [0, 1, 2], SEED, 2, KEY)
    bad["groups"][0]["words"] = bad["groups"][0]["words"].float()
    with pytest.raises(OpeningError, match="wrong form"):
        check_openings(bad, _plain, committed, [0, 1, 2], SEED, 2, KEY)
    bad = open_slots(outs, [0, 1, 2], SEED, 2, KEY)
    bad["groups"][0]["slots"] = [0, 1, 9]
    with pytest.raises(OpeningError, match="not asked for"):
        check_openings(bad, _plain, committed, [0, 1, 2], SEED, 2, KEY)


def test_a_padding_node_in_a_path_must_be_zero():
    """At an odd level the tree pads with a zero node: a path that shows anything else there is refused (it would
    let a worker choose a free word on the way up)."""
    outs = [torch.randn(5 * 4, generator=torch.Generator().manual_seed(k)) for k in range(2)]  # 10 words: 10, 5, 3, 2, 1
    assert widths(80) == [10, 5, 3, 2, 1]
    committed = commitments(outs, KEY)
    reply = open_slots(outs, [0, 1], SEED, 10, KEY)  # every chunk: chunk 8 or 9 meets the padding at level 1
    path = reply["groups"][0]["path"]
    assert int(path[0, 9, 1]) == 0  # chunk 9's ancestor at level 1 is node 4, whose sibling (5) is padding
    path[0, 9, 1] = 12345
    with pytest.raises(OpeningError, match="padding"):
        check_openings(reply, _plain, committed, [0, 1], SEED, 10, KEY)


def test_an_output_the_candidate_hands_back_as_a_number_or_of_another_size_is_refused():
    outs = _slots(2)
    slots = [0, 1]
    ref = check_openings(open_slots(outs, slots, SEED, 2, KEY), _plain, commitments(outs, KEY), slots, SEED, 2, KEY)
    as_number = [(1.5, o[1], o[2]) for o in outs]
    got = check_openings(open_slots(as_number, slots, SEED, 2, KEY), _plain, commitments(as_number, KEY), slots, SEED,
                         2, KEY)
    assert "output 0 is a value where the baseline's is not" in compare_chunks(got, ref, lambda dtype: TOL)
    shorter = [(o[0][:2], o[1], o[2]) for o in outs]
    got = check_openings(open_slots(shorter, slots, SEED, 2, KEY), _plain, commitments(shorter, KEY), slots, SEED, 2,
                         KEY)
    assert "baseline's size" in compare_chunks(got, ref, lambda dtype: TOL)


def test_the_tree_kernel_opens_the_same_chunks(monkeypatch):
    """Rows of 512 words and more climb their first levels in runners/hash_tree.py's kernel on CUDA (here under the
    interpreter): the same chunks, paths and hashes as the torch tree."""
    outs = [torch.randn(4100, generator=torch.Generator().manual_seed(k)) for k in range(2)]  # 2050 words
    want = open_slots(outs, [0, 1], SEED, 2, KEY)
    monkeypatch.setattr(hash_tree, "INTERPRETED", True)
    monkeypatch.setattr(hash_tree, "BROKEN", [])
    got = open_slots(outs, [0, 1], SEED, 2, KEY)
    assert not hash_tree.BROKEN
    assert got["hs"] == want["hs"]
    assert torch.equal(got["groups"][0]["words"], want["groups"][0]["words"])
    assert torch.equal(got["groups"][0]["path"], want["groups"][0]["path"])
    check_openings(got, _plain, commitments(outs, KEY), [0, 1], SEED, 2, KEY)


def test_an_output_past_the_baselines_is_refused():
    """A slot that returns more outputs than the baseline's: the extra one's word would be folded in unchecked (a
    free word in the slot's hash), so it is refused (round 11's review)."""
    outs = _slots(2)
    slots = [0, 1]
    ref = check_openings(open_slots(outs, slots, SEED, 2, KEY), _plain, commitments(outs, KEY), slots, SEED, 2, KEY)
    longer = [(*o, torch.zeros(4)) for o in outs]
    got = check_openings(open_slots(longer, slots, SEED, 2, KEY), _plain, commitments(longer, KEY), slots, SEED, 2,
                         KEY)
    assert "output 3 is one the baseline does not return" in compare_chunks(got, ref, lambda dtype: TOL)
