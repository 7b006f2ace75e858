"""Attacks on the three-role judge, second round, through the real Evaluator on the CPU (tests/cheats/).

As in tests/test_judge_attacks.py: every cheat runs past the static policy (the judge must hold on its own);
attacks that the judge lets through today are `xfail(strict=True)` with the mechanism in the reason, and pass
once it is fixed. Timing attacks run against a judge of their own in a subprocess, on the timed CPU stand-in
of tests/test_judge_attacks.py (host clock instead of CUDA events, direct calls instead of graph replay; every
judge step is the real one).
"""
from __future__ import annotations

import pytest
from conftest import CHEATS
from test_judge_attacks import _own_judge


def _source(name: str) -> str:
    return (CHEATS / name).read_text()


_TIMED = ["BASELINE", "derives_window_seed.py", "negative_sample_times.py"]


@pytest.fixture(scope="module")
def timed_round2(rms_bundle, tmp_path_factory) -> dict:
    """The timing attacks of this round, one after the other, against one judge on the timed stand-in."""
    sources = [c if c == "BASELINE" else _source(c) for c in _TIMED]
    results = _own_judge(rms_bundle, tmp_path_factory.mktemp("timed2"), sources, timed=True)
    return dict(zip(_TIMED, results))


def test_the_baseline_passes_the_timed_stand_in(timed_round2):
    """Control: the stand-in's protocol accepts the baseline against itself, so refusals below are the attacks'.
    (Not the honest rewrite: on the interpreter it really is about 2x faster, more than the stand-in's clock
    corroborates.)"""
    ev = timed_round2["BASELINE"]
    assert ev["ok"] and ev["timed"], ev


@pytest.mark.xfail(strict=True, reason=(
    "runners/judge_clock.py _corroborate: the warm-up refill's seed is `seed ^ 0x5A5A`, so the worker learns the "
    "timed pass's seed before the judge's clock starts, runs the pass inside `refill` and answers `window` at "
    "once; the judge's clock sees an empty pass and corroborates any claim (fake 1.67x, ok). Fix: an independent "
    "warm-up seed (trial_seed(secret, 55_000 + round, index)); and refuse a candidate pass shorter than the "
    "oracle's by more than the clock resolves instead of treating it as a licence"))
def test_the_window_seed_cannot_be_derived_from_the_warm_up(timed_round2):
    ev = timed_round2["derives_window_seed.py"]
    assert not ev["ok"] and ev["stage"] == "timing", ev


@pytest.mark.xfail(strict=True, reason=(
    "runners/judge_clock.py time_case takes `float(reply['us'])` unchecked: negative sample times give a negative "
    "claimed speedup, which passes corroborate (`claimed <= judge_speedup * (1 + allowed)`) and implausible "
    "(`speedup > 10`); the evaluation is ok with negative speedups and Evaluation.fitness raises (log of a "
    "negative). Fix: refuse (stage timing) any sample that is not a finite number > 0, and bound the claim "
    "from below too"))
def test_negative_sample_times_are_refused(timed_round2):
    ev = timed_round2["negative_sample_times.py"]
    assert not ev["ok"] and ev["stage"] == "timing", ev
