"""Round 10: attacks on the window's openings (runners/openings.py), and whether an honest kernel's outputs could be
refused by them.

The hole of this round: the openings sent each chunk with the sibling nodes of its hash-tree path, chosen by the
worker, and the tree's node ``_compress(a, b, alpha)`` (runners/commitments.py) was solvable for its LEFT word given
the right word and the parent (a 2-D lattice, ``solve_left`` in tests/cheats/round10_forges_opening_paths.py): a worker
sent any chunk up to any hash it had committed to without the output, and skipped slots passed the openings (credited
1.77-2.06x through the judge). The node was mixed for it, and round 11 solved the mixed node too; the fix that holds
takes the siblings out of the worker's hands: the digest sent when the pass ends covers every output's chunk-level
nodes, and the judge climbs each chunk to its node itself. Section 1: the node; section 2: the judge's verdict on the
timed CPU stand-in (tests/test_judge_attacks_round4.py ``_timed_judge``); section 3: what the openings hold against;
section 4: honest outputs.
"""
from __future__ import annotations

import importlib.util
import json
import random

import pytest
import torch
from conftest import CHEATS
from test_judge_attacks_round4 import _source, _timed_judge

from test_openings import check, opened

from runners.commitments import _compress
from runners.openings import OpeningError, compare_chunks
from runners.protocol import trial_seed
from runners.task import Tolerance

FORGER = "round10_forges_opening_paths.py"  # its solver (the worker handlers speak the openings' first form)
KEY, SEED = 0x5EED_1234, 77
TOL = Tolerance(atol=1e-3, rtol=4e-3)


def _plain(meta, most):
    """The judge's decode when nothing crosses a wire."""
    return meta


def _forger():
    """The cheat's forging functions (imported outside a worker: no handler is replaced)."""
    spec = importlib.util.spec_from_file_location("round10_forger", CHEATS / FORGER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outputs(count: int = 12, seed: int = 0) -> list:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(4, 256, generator=g).half(), torch.randn(4, 256, generator=g).half()) for _ in range(count)]


def _refused(opening: tuple, slots: list, ref: dict) -> str:
    """'' where the judge's openings accept ``opening`` (reply, commits, rows) and its chunks match ``ref``; else why."""
    try:
        got = check(*opening, slots)
    except OpeningError as exc:
        return f"OpeningError: {exc}"
    return compare_chunks(got, ref, lambda dtype: TOL)


# ---- 1. the node is solvable for its left word --------------------------------------------------------------------

def test_the_lattice_no_longer_solves_the_node_for_its_left_word():
    """(Was the hole of this round: ``rot32(a + alpha*b) * (2b + 1) + a`` is linear in the two 32-bit halves of
    ``a + alpha*b``, and ``solve_left`` found a left word about 7 times in 10, each one checked with the judge's own
    ``_compress``.) The node is mixed now (runners/commitments.py ``_compress``: xor-shifts, a multiplication and a
    feed-forward of both words): the same solve, tried on the same 200 draws, gives no left word that the judge's
    node takes to the parent, while it still solves the unmixed form (the control)."""
    forger = _forger()
    rng = random.Random(5)
    solved_old, solved_new = 0, 0
    for _ in range(200):
        b, parent, alpha = rng.getrandbits(64), rng.getrandbits(64), rng.getrandbits(64) | 1
        a = forger.solve_left(b, parent, alpha)
        if a is None:
            continue
        solved_old += forger.unmixed(a, b, alpha) == parent
        got = _compress(torch.tensor([[forger._s(a)]]), torch.tensor([[forger._s(b)]]), forger._s(alpha))
        solved_new += int(got) == forger._s(parent)
    assert solved_old >= 100 and solved_new == 0, (solved_old, solved_new)


# (A unit test forged the paths of skipped slots' chunks here; the openings no longer take a path from the worker:
# tests/test_openings.py shows a chunk computed after the clock missing the node committed to.)


# ---- 2. the judge's verdict: half of every pass skipped, the openings forged ---------------------------------------

WINDOW = {"max_slots": 4, "max_window_slots": 12, "reveal_slots": 2}  # 12 slots, 2 shown a round (prefill-like)


def _seeds_showing_only(kept: set, count: int = 12, reveal: int = 2, want: int = 2) -> list[int]:
    """Secrets for which the judge's window (runners/judge_clock.py _corroborate: one case, index 0) shows only slots
    in ``kept`` in all three rounds."""
    def shown(s: int, r: int) -> set:
        g = torch.Generator().manual_seed(trial_seed(s, 60_000 + r, 0))
        return set(torch.randperm(count, generator=g)[:reveal].tolist())

    return [s for s in range(1, 3000) if all(shown(s, r) <= kept for r in range(3))][:want]


@pytest.fixture(scope="module")
def forged_runs(rms_bundle, tmp_path_factory) -> dict:
    """Round 4's skipper (stale outputs in slots 6-11 of every pass, honest commitments) at a secret whose full reveals
    show only slots 0-5: a judge of its own on the timed stand-in (T=4, H=256, with the residual)."""
    skipper_seed = _seeds_showing_only(set(range(6)), want=1)[0]
    skipper = _source("round4_skips_unshown_slots.py", MIN_NUMEL="1")
    no_rows = skipper + "\n\n" + _source("round11_keeps_no_rows.py")
    runs = _timed_judge(rms_bundle, tmp_path_factory.mktemp("timed10"),
                        [(skipper, "verify", skipper_seed, WINDOW), (no_rows, "verify", skipper_seed, WINDOW)],
                        {"T": 4, "H": 256, "residual": True})
    return dict(zip(["skipper", "no rows"], runs))


def test_a_skipper_without_forged_paths_is_refused_by_the_openings(forged_runs):
    """The secret's full reveals miss the skipped slots; the openings catch the stale chunks."""
    ev = forged_runs["skipper"]
    assert not ev["ok"] and ev["stage"] == "timing" and "opened chunk" in ev["error"], json.dumps(ev)


def test_a_skipper_whose_commitments_keep_no_rows_is_refused(forged_runs):
    """A worker that keeps no rows of nodes has nothing to open, and its digest covers its slots' hashes alone: its
    rows are held to the baseline's (and its openings would lack the chunks the oracle's have: compare_chunks)."""
    ev = forged_runs["no rows"]
    assert not ev["ok"] and ev["stage"] == "timing" and "rows of nodes" in ev["error"], json.dumps(ev)


# The path forger (tests/cheats/round10_forges_opening_paths.py) ran through the judge here while the openings took
# paths: its skipped slots passed and it was credited 1.77x and 2.06x. It speaks the openings' first form, which the
# judge no longer takes (no paths; the rows of nodes are the digest's), so it is kept for its solver only (section 1).


# ---- 3. what the openings hold against --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def honest_opening():
    outs, slots = _outputs(4, seed=1), [0, 1, 2, 3]
    return outs, slots, check(*opened(outs, slots), slots)


def test_the_candidates_dtype_name_does_not_skip_the_comparison(honest_opening):
    """compare_chunks reads the ORACLE's dtype: a wrong slot opened honestly (its true commitments) and named
    complex128 / a dtype that does not exist is still compared as float16."""
    outs, slots, ref = honest_opening
    wrong = list(outs)
    wrong[2] = (outs[2][0] + 1, outs[2][1])
    for name in ("complex128", "no_such_dtype", "float64"):
        reply, commits, rows = opened(wrong, slots)
        for g in reply["groups"]:
            g["dtype"] = name
        assert _refused((reply, commits, rows), slots, ref).startswith("slot 2: "), name


def test_an_output_of_another_dtype_with_the_same_bytes_is_compared_as_the_oracles(honest_opening):
    """bfloat16 where the oracle returns float16 (the same 2 bytes an element): read as float16, the bytes are wrong."""
    outs, slots, ref = honest_opening
    other = [(o[0].float().bfloat16(), o[1]) for o in outs]
    assert "output 0" in _refused(opened(other, slots), slots, ref)


def test_nan_where_the_oracle_is_finite_is_refused(honest_opening):
    outs, slots, ref = honest_opening
    nan = [(torch.full_like(o[0], float("nan")), o[1]) for o in outs]
    assert "NaN" in _refused(opened(nan, slots), slots, ref)


def test_a_slot_shown_as_having_no_outputs_is_refused(honest_opening):
    """An empty ``hs`` row would fold to the fold's start (k(77)); the outputs with rows are the judge's to hash."""
    outs, slots, ref = honest_opening
    reply, commits, rows = opened(outs, slots)
    reply["hs"]["3"] = []
    assert "slot 3: output 0 is missing" in _refused((reply, commits, rows), slots, ref)


def test_a_second_group_for_an_output_or_another_size_is_refused(honest_opening):
    outs, slots, ref = honest_opening
    reply, commits, rows = opened(outs, slots)
    other = opened([(o[0][:2], o[1]) for o in outs], slots)[0]  # 1024 bytes, honest words
    reply["groups"].append(other["groups"][0])
    assert "not asked for" in _refused((reply, commits, rows), slots, ref)
    for bad in (-8, 2.0, True):
        reply, commits, rows = opened(outs, slots)
        reply["groups"][0]["nbytes"] = bad
        assert "not asked for" in _refused((reply, commits, rows), slots, ref), bad


def test_an_opening_that_repeats_a_slot_is_refused(honest_opening):
    """(Was a hole: each repeated member was drawn, decoded and climbed on the judge's CPU, up to ~8M members from
    one 16 MB message.) A group lists exactly the slots asked for, once each."""
    outs, slots, ref = honest_opening
    reply, commits, rows = opened(outs, slots)
    g = reply["groups"][0]
    reps = 500
    reply["groups"].append({**g, "slots": [1] * reps, "words": g["words"][1:2].repeat(reps, 1, 1)})
    assert "not asked for" in _refused((reply, commits, rows), slots, ref)


def test_a_wrong_number_in_an_opened_slot_is_refused():
    """(Was a hole: a number output was compared only in the 2-16 slots shown in full.) Each opened slot shows what
    the wire carries for its numbers, hashed to the words it committed to and compared with the oracle's."""
    g = torch.Generator().manual_seed(2)
    outs = [(torch.randn(64, generator=g), 7) for _ in range(4)]
    slots = [0, 1, 2, 3]
    ref = check(*opened(outs, slots), slots)
    wrong = [(o[0], 8 if s == 2 else 7) for s, o in enumerate(outs)]
    assert "slot 2: output 1" in _refused(opened(wrong, slots), slots, ref)


# ---- 4. honest outputs the openings must not refuse ------------------------------------------------------------

def _nudged(t):
    """The same output as another honest kernel might return it: floats moved well within the tolerance."""
    if not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point or t.element_size() < 2:
        return t
    return (t.double() * (1 + 1e-4)).to(t.dtype)


@pytest.mark.parametrize("make", [
    lambda g, s: torch.randn(1, 64, generator=g).half().expand(8, 64),  # a broadcast view (stride 0)
    lambda g, s: torch.randn(8, 8, generator=g).t()[::2],  # strided
    lambda g, s: torch.randn(s + 1, 37, generator=g),  # a shape per slot (a range scalar)
    lambda g, s: torch.empty(0, 5),  # empty
    lambda g, s: torch.randn(16, generator=g).to(torch.float8_e4m3fn),
    lambda g, s: torch.randint(0, 2, (70,), generator=g).bool(),
    lambda g, s: torch.tensor(1.5 + s),  # 0-dim
    lambda g, s: torch.where(torch.arange(64) % 3 == 0, float("nan"), torch.randn(64, generator=g)).half(),
    lambda g, s: (lambda t: (t, t))(torch.randn(64, generator=g)),  # one tensor at two positions (aliased)
    lambda g, s: (torch.randn(9, generator=g), None) if s % 2 else (torch.randn(9, generator=g), torch.zeros(3)),
    lambda g, s: {"b": torch.randn(5, generator=g), "a": torch.randn(300, generator=g).bfloat16()},
], ids=["expanded", "strided", "per-slot-shape", "empty", "fp8", "bool", "0-dim", "nan", "aliased", "kinds-per-slot",
        "dict"])
def test_honest_outputs_pass_the_openings(make):
    g = torch.Generator().manual_seed(3)
    ref_outs = [make(g, s) for s in range(5)]
    got_outs = [tuple(_nudged(t) for t in o) if isinstance(o, tuple) else
                {k: _nudged(v) for k, v in o.items()} if isinstance(o, dict) else _nudged(o) for o in ref_outs]
    slots = [0, 1, 2, 3, 4]
    ref = check(*opened(ref_outs, slots), slots)
    assert _refused(opened(got_outs, slots), slots, ref) == ""
