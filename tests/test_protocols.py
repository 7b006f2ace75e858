"""The two protocols of the judge: the full one (verification, the default) and the search's screening one,
which keeps every check on a smaller time budget (runners/protocol.py)."""
import dataclasses

import pytest
from conftest import CHEATS

from runners.judge import profiled_cases
from runners.protocol import Protocol
from runners.task import Case


def test_the_search_protocol_keeps_every_check_and_cuts_only_time():
    full, quick = Protocol(), Protocol.search()
    assert (full.name, quick.name) == ("verify", "search")
    # what decides a verdict is the same
    for field in ("corroboration_tolerance", "window_rounds", "reveal_slots", "min_own_share", "clock_jitter_us",
                  "window_lead_cycles", "max_fetch_bytes"):
        assert getattr(quick, field) == getattr(full, field), field
    # what it saves is time
    assert quick.case_time_cap_s < full.case_time_cap_s and quick.window_us < full.window_us
    assert quick.max_window_slots < full.max_window_slots and not quick.profile_every_case
    assert full.profile_every_case


def test_screening_profiles_the_smallest_and_the_largest_case():
    cases = [Case(symbols={"T": n}, dtype="float16") for n in (512, 1, 4096, 64)]
    size = lambda c: c.symbols["T"]  # noqa: E731
    assert profiled_cases(cases, False, size) == [1, 2]
    assert profiled_cases(cases, True, size) == [0, 1, 2, 3]
    assert profiled_cases(cases[:2], False, size) == [0, 1]


def test_an_unknown_protocol_is_an_error(rms_evaluator):
    with pytest.raises(ValueError, match="verify' or 'search"):
        rms_evaluator.evaluate(rms_evaluator.baseline, seed=1, protocol="fast")


def test_the_search_protocol_is_recorded_and_refuses_what_the_full_one_refuses(rms_evaluator):
    ok = rms_evaluator.evaluate(rms_evaluator.baseline, seed=3, trials=1, protocol="search")
    assert ok.ok and ok.protocol == "search", ok.error
    cheat = rms_evaluator.evaluate((CHEATS / "torch_only.py").read_text(), seed=3, trials=1, static_policy=False,
                                   protocol="search")
    assert not cheat.ok and cheat.stage == "kernel" and cheat.protocol == "search", (cheat.stage, cheat.error)
    assert dataclasses.asdict(cheat)["protocol"] == "search"
