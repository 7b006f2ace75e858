"""Round 11: the mixed tree node of round 10 (runners/commitments.py ``_compress``, runners/hash_tree.py ``_fold``)
attacked for what the openings (runners/openings.py) rest on: that no worker can find, for a given parent, right word
and key constant, a left word (or the other way round).

It can. All of the node's operations act on the two 32-bit halves of its words as T-functions (bit i of each half of
a result depends only on bits 0..i of the inputs' halves) except two 32-bit carry words, the high halves of
``zh * ml`` (in ``rot32(a + alpha*b) * (2b + 1)``) and of ``X * MIX_lo`` (in ``xs32(v) * MIX``). The first is at
most ``ml + 1`` and one of three values when the right word's ``2b + 1`` has low half 1; the second depends on X's top
bits additively over X's 16-bit halves, which a meet in the middle on 2**16 entries a side settles. Bits are then
fixed from the bottom up: about 2**20 word steps for a left word (``solve_left`` in
tests/cheats/round11_solves_the_mixed_node.py), a third of a second in numpy; the right word's low half is set to 0
(or 2**31) by the same meet in the middle one level below (``partial_left``, ``partial_right``). So round 10's forger
works again: a chunk of the outputs computed after the clock, sent up a fake tree committed to without them.

Closed by taking the paths away (below): what stands is that the node is solvable, so nothing rests on it above a
chunk; inside a chunk every word is pinned within the tolerance by the comparison with the oracle's.
"""
from __future__ import annotations

import importlib.util
import random

import torch
from conftest import CHEATS

from runners.commitments import _compress

FORGER = "round11_solves_the_mixed_node.py"


def _forger():
    """The cheat's forging functions (imported outside a worker: no handler is replaced)."""
    spec = importlib.util.spec_from_file_location("round11_forger", CHEATS / FORGER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _judge_node(f, a: int, b: int, alpha: int) -> int:
    """The judge's own node (torch, signed int64), as an unsigned int."""
    got = _compress(torch.tensor([[f._s(a)]]), torch.tensor([[f._s(b)]]), f._s(alpha))
    return f._u(int(got))


# ---- 1. the node, solved --------------------------------------------------------------------------------------------

def test_the_mixed_node_is_solved_for_its_left_word():
    """For random parents and key constants and a right word whose low half is 0 or 2**31, ``solve_left`` returns
    every left word that the judge's ``_compress`` takes to the parent (about 6 draws in 10 have one: a random
    function's odds), in well under a second each."""
    f = _forger()
    rng = random.Random(11)
    solved = 0
    for _ in range(6):
        alpha, parent = rng.getrandbits(64) | 1, rng.getrandbits(64)
        b = (rng.getrandbits(32) << 32) | rng.choice((0, 1 << 31))
        found = f.solve_left(b, parent, alpha)
        assert all(_judge_node(f, a, b, alpha) == parent for a in found)
        solved += bool(found)
    assert solved >= 2, solved


def test_the_node_below_is_given_a_right_word_the_solver_takes():
    """One level below the turn, the free sibling (left or right of the climbed node) is solved so that the parent's
    low half is 0 or 2**31: the judge's node agrees."""
    f = _forger()
    rng = random.Random(12)
    left, right = 0, 0
    for _ in range(4):
        alpha, x = rng.getrandbits(64) | 1, rng.getrandbits(64)
        for target in (0, 1 << 31):
            for s in f.partial_left(x, target, alpha, rng.getrandbits(32)):
                assert _judge_node(f, s, x, alpha) & f.M32 == target
                left += 1
            for s in f.partial_right(x, target, alpha, 0):
                assert _judge_node(f, x, s, alpha) & f.M32 == target
                right += 1
    assert left >= 2 and right >= 2, (left, right)


# ---- 2. the openings, forged ---------------------------------------------------------------------------------------


# The forged paths of this round's first form (a strict xfail: every opened chunk of two skipped slots of twelve sent up
# a fake tree through the mixed node, accepted) are gone with the paths themselves: the window's digest now covers
# every output's chunk-level nodes (runners/commitments.py ``CommitPlan.rows``, ``digest``) and the judge climbs each
# opened chunk to its node (runners/openings.py ``check_openings``): no node above a chunk is the worker's to choose,
# so the node's solvability (the two tests above, still true) leaves the openings standing. A chunk computed after
# the clock missing the node committed to: tests/test_openings.py.
