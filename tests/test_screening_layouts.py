"""The search's screening tries one padded layout per case, drawn from the secret; the verification all three
(runners/layouts.py ``layouts_to_try``, runners/judge.py ``_check_layout``, ``Protocol.layout_trials``)."""
from __future__ import annotations

from conftest import CHEATS

from runners.layouts import layouts_to_try
from runners.protocol import Protocol


def test_the_verification_tries_every_layout_and_the_search_one_drawn_from_the_secret():
    assert Protocol().layout_trials == 3 and Protocol.search().layout_trials == 1
    assert all(layouts_to_try([True] * 3, 3, seed) == [0, 1, 2] for seed in range(20))
    picks = [layouts_to_try([True] * 3, 1, seed) for seed in range(60)]
    assert all(len(p) == 1 for p in picks) and {p[0] for p in picks} == {0, 1, 2}  # each can be the one
    assert all(layouts_to_try([True, False, True], 1, seed)[0] != 1 for seed in range(60))  # one that changes
    assert layouts_to_try([False] * 3, 1, 5) == [] and layouts_to_try([False, True, False], 3, 5) == [1]


def test_a_kernel_that_assumes_dense_rows_is_still_refused_by_the_screening(rms_evaluator):
    """tests/cheats/round4_assumes_dense_rows.py is wrong on every padded layout: whichever one a case draws."""
    source = (CHEATS / "round4_assumes_dense_rows.py").read_text()
    ev = rms_evaluator.evaluate(source, seed=12, time_it=False, trials=1, static_policy=False, protocol="search")
    assert ev.protocol == "search"
    assert not ev.ok and ev.stage == "correctness" and "wider buffer" in ev.error, (ev.stage, ev.error)
