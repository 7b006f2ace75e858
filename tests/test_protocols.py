"""The two protocols of the judge: the full one (verification, the default) and the search's screening one,
which keeps every check on a smaller time budget (runners/protocol.py)."""
import dataclasses

import pytest
from conftest import CHEATS

from runners.judge import claimed_faster, profiled_cases
from runners.protocol import Protocol
from runners.results import CaseResult
from runners.task import Case


def test_the_search_protocol_keeps_every_check_and_cuts_only_time():
    full, quick = Protocol(), Protocol.search()
    assert (full.name, quick.name) == ("verify", "search")
    # what decides a verdict is the same
    for field in ("corroboration_tolerance", "reveal_slots", "min_own_share", "clock_jitter_us",
                  "window_lead_cycles", "max_fetch_bytes"):
        assert getattr(quick, field) == getattr(full, field), field
    # what it saves is time
    assert quick.case_time_cap_s < full.case_time_cap_s and quick.window_us < full.window_us
    assert quick.max_window_slots < full.max_window_slots and not quick.profile_every_case
    # fewer rounds of the clock, but at least three counted: a median that one round's jump cannot move
    assert 4 <= quick.window_rounds < full.window_rounds
    assert not quick.window_every_case and full.profile_every_case and full.window_every_case


def test_screening_profiles_only_where_a_speedup_is_claimed():
    cases = [Case(symbols={"T": n}, dtype="float16") for n in (512, 1, 4096, 64)]
    results = [CaseResult(case=str(n), baseline_us=b, candidate_us=c)
               for n, b, c in ((512, 10.0, 9.0), (1, 2.0, 2.5), (4096, 50.0, 60.0), (64, 3.0, 3.0))]
    assert claimed_faster(results) == {0}
    assert profiled_cases(claimed_faster(results), len(cases), False) == [0]
    assert profiled_cases(claimed_faster(results), len(cases), True) == [0, 1, 2, 3]
    assert profiled_cases(claimed_faster(results[1:]), len(cases) - 1, False) == []  # no claim: nothing to profile


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


def test_an_input_handed_back_is_not_counted_as_moved_bytes():
    """Liger's swiglu_forward returns (a, b, c): counting a and b again put the honest baseline at 7 TB/s, above
    the bandwidth bound, on the H200 (bench/results/liger-kernel-h200)."""
    import torch

    from runners.protocol import moved_bytes
    from runners.worker import aliased_outputs

    a, b = torch.randn(4, 8), torch.randn(4, 8)
    c = a * b
    ins = {"a": a, "b": b}

    def moved(out, written, kwargs=ins):  # as the judge counts it: with the oracle's aliasing flags
        return moved_bytes(kwargs, out, written, aliased_outputs(out, kwargs))

    assert moved((a, b, c), []) == 3 * 4 * 8 * 4
    assert moved(c, []) == 3 * 4 * 8 * 4
    assert moved((a.view(2, 16), b.view(-1), c), []) == 3 * 4 * 8 * 4  # views of the inputs
    assert moved((c, c + 1), [a]) == 5 * 4 * 8 * 4
    assert moved(a.half(), [], {"a": a, "n": 3}) == 4 * 8 * 4 + 4 * 8 * 2  # another dtype is another tensor
    assert moved_bytes(ins, (a.clone(), c), []) == 4 * 4 * 8 * 4  # no flags from the oracle: every output counts


def test_a_spare_started_in_a_search_thread_outlives_the_thread(rms_evaluator):
    """The search evaluates in pool threads that end with it; a worker dies with the thread that started it
    (the parent-death signal follows the thread), so on the H200 the warm spare started during the last search
    evaluation was dead when the champion's re-verification took it ('PeerGone ... killed by SIGKILL'). Workers
    are started from the evaluator's own long-lived thread."""
    import threading
    import time

    results = []
    t = threading.Thread(target=lambda: results.append(rms_evaluator.evaluate(rms_evaluator.baseline, seed=11,
                                                                               trials=1)))
    t.start()
    t.join()
    spare = rms_evaluator._spare
    assert results[0].ok and spare is not None
    time.sleep(1.5)
    assert spare.alive(), spare.exit_description()
    again = rms_evaluator.evaluate(rms_evaluator.baseline, seed=12, trials=1)
    assert again.ok and again.stage == "done", again.error
