"""The judge's clock against claimed times, on wall times like those measured on the H200
(bench/results/evaluator-h200/diag.txt): an honest candidate passes, a forged claim is quarantined."""
import pytest

from runners.judge import corroborate

from runners.corroboration import Corroboration, credit_cap

MS = 1000.0  # the judge works in microseconds


def walls(*ms):
    return [m * MS for m in ms]


def test_identical_kernels_at_decode_pass_despite_a_noisy_clock():
    # rms_norm T=1,H=4096 fp16: 2048 calls of 1.44 us in a pass; a fresh candidate process ran slower passes
    v = corroborate(walls(55.6, 7.0, 6.0), walls(2.95, 2.95, 2.95), walls(55.9, 9.7, 8.3), 1.444, 1.455, 0.05, 150)
    assert v.ok and v.allowed > 1.0  # the clock cannot resolve decode sizes finely: it says so


def test_a_gross_forgery_at_decode_is_caught():
    v = corroborate(walls(55.6, 7.0, 6.0), walls(2.95, 2.95, 2.95), walls(55.9, 9.7, 8.3), 1.444, 0.144, 0.05, 150)
    assert not v.ok and v.claimed > 9


def test_prefill_sizes_are_resolved_to_about_a_quarter():
    args = (walls(11.97, 11.89, 12.05), walls(10.2, 10.2, 10.2), walls(11.93, 11.86, 11.72))
    parts = {"shaveable_b": walls(0.3, 0.3, 0.3), "slots": 731}  # the oracle's lead and commitments
    honest = corroborate(*args, 38.6, 38.4, 0.05, 150, **parts)
    assert honest.ok and 0.95 < honest.judge_speedup < 1.1 and honest.allowed < 0.3
    forged = corroborate(*args, 38.6, 38.6 / 1.35, 0.05, 150, **parts)  # claims 1.35x, the clock saw about 1.0x
    assert not forged.ok


def test_a_truly_faster_candidate_is_not_held_back():
    # the candidate's passes are really shorter: its claim of 1.5x matches the clock
    v = corroborate(walls(12.0, 12.0, 12.0), walls(10.2, 10.2, 10.2), walls(8.6, 8.6, 8.6), 38.6, 25.7, 0.05, 150)
    assert v.ok and 1.4 < v.judge_speedup < 1.7


def test_the_rounds_are_paired_and_a_candidates_noise_widens_nothing():
    """Both sides' walls move together round by round (the H200, sixteenth session: 14.8 ms in some rounds and 12.0
    in others for the same kernel on both sides): the paired estimator reads parity where the shortest candidate wall
    against the median extra read 0.8x. And the candidate's walls are its own to make noisy: its spread never widens
    the allowance, so a claim of parity for a 24 % slower pass stays quarantined however its rounds jump."""
    oracle, passes = walls(12.0, 14.8, 12.0, 14.8, 12.0), walls(4.9, 4.9, 4.9, 4.9, 4.9)
    same = corroborate(oracle, passes, walls(12.1, 14.7, 12.1, 14.9, 11.9), 4.9, 4.9, 0.05, 150, slots=40)
    assert same.ok and 0.97 < same.judge_speedup < 1.03
    oracle = walls(12.0, 12.3, 12.1, 12.2, 12.0)  # a quieter oracle, whose extra the clock resolves
    parts = {"shaveable_b": walls(0.3, 0.3, 0.3, 0.3, 0.3), "slots": 40}  # the oracle's lead and commitments
    slow = [w + 1.2 for w in (12.0, 12.3, 12.1, 12.2, 12.0)]  # every round 1.2 ms longer: a pass of 6.1 ms
    quiet = corroborate(oracle, passes, walls(*slow), 4.9, 4.9, 0.05, 150, **parts)
    noisy = corroborate(oracle, passes, walls(*[w + j for w, j in zip(slow, (0, 4, -1, 5, 0))]), 4.9, 4.9, 0.05, 150,
                        **parts)
    assert quiet.resolved and not quiet.ok and not noisy.ok and noisy.allowed == quiet.allowed


def test_a_skipped_lead_sleep_is_never_credited():
    """tests/cheats/sheds_the_window_extra.py on the H200: its worker skipped the lead sleep of the timed request,
    the judge subtracted the oracle's whole extra (lead included) from its wall, and a pass as long as the
    oracle's was credited 1.17x. The credit now counts the lead as skippable; an honest candidate, which runs it,
    loses only the lead against its pass."""
    oracle, passes = walls(5.9, 5.9, 5.9), walls(5.0, 5.0, 5.0)  # a 5 ms pass, 0.5 ms lead, 0.4 ms else
    parts = {"shaveable_b": walls(0.8, 0.8, 0.8), "slots": 700, "leads_b": walls(0.5, 0.5, 0.5)}
    shed = corroborate(oracle, passes, walls(5.4, 5.4, 5.4), 4.0, 4.0 / 1.29, 0.05, 150, **parts)
    assert shed.judge_speedup > 1.1  # what the whole extra made of it
    assert credit_cap(shed, 0.05) <= 1.05 and shed.credit_speedup is not None and shed.credit_speedup <= 1.0
    honest = corroborate(oracle, passes, walls(4.9, 4.9, 4.9), 4.0, 4.0 / 1.25, 0.05, 150, **parts)
    assert honest.ok and credit_cap(honest, 0.05) > 1.14  # 1.25x, seen as 1.11x with the lead counted


def test_a_clock_that_cannot_resolve_the_size_credits_nothing():
    # The H200 at decode sizes before the fill was batched (bench/results/evaluator-h200/attacks-gpu.json):
    # 8192 calls (about 12 ms of kernels) inside requests of 45-95 ms that moved by tens of milliseconds.
    v = corroborate(walls(93.0, 57.6, 44.8), walls(12.0, 12.0, 12.0), walls(71.5, 46.6, 42.7), 1.44, 1.44, 0.05, 150,
                    shaveable_b=walls(0.6, 0.6, 0.6))
    assert not v.resolved  # the judge then credits at most 1.0x (runners/judge_clock.py)


def test_a_candidate_request_shorter_than_the_extra_is_not_an_infinite_speedup():
    # the candidate's whole request came back faster than the oracle's extra alone: its pass by the judge's
    # clock would be negative; it is held at the floor and the size is reported unresolved
    v = corroborate(walls(40.0, 40.0, 40.0), walls(12.0, 12.0, 12.0), walls(20.0, 20.0, 20.0), 1.44, 0.48, 0.05, 150,
                    shaveable_b=walls(0.6, 0.6, 0.6))
    assert not v.resolved and v.judge_speedup <= 10.0 + 1e-9


def test_only_what_a_worker_could_skip_widens_the_allowance():
    # prefill: a request of 31 ms holds a 20 ms pass, 9 ms of filling the slots and 1.5 ms of lead and
    # commitments. A worker cannot skip the fill (every slot's values are checked through the revealed outputs),
    # so only the 1.5 ms counts: a forged 3.2x claim is quarantined, an honest 1.0x is not.
    args = (walls(31.0, 30.9, 31.1), walls(20.0, 20.0, 20.0), walls(31.1, 31.0, 31.2))
    honest = corroborate(*args, 38.6, 38.5, 0.05, 150, shaveable_b=walls(1.5, 1.5, 1.5), slots=1024)
    assert honest.ok and honest.resolved and honest.allowed < 0.25
    forged = corroborate(*args, 38.6, 38.6 / 3.2, 0.05, 150, shaveable_b=walls(1.5, 1.5, 1.5), slots=1024)
    assert not forged.ok


def test_the_credit_follows_the_clock_below_parity_too():
    """A case the clock resolves at 0.87x is credited at most 0.87 x 1.05, not parity within the allowance."""
    seen_slower = Corroboration(claimed=1.0, judge_speedup=0.87, allowed=0.2, ok=True, resolved=True)
    assert abs(credit_cap(seen_slower, 0.05) - 0.9135) < 1e-9
    assert credit_cap(Corroboration(1.3, 1.25, 0.1, True, True), 0.05) == 1.25 * 1.05
    assert credit_cap(Corroboration(1.3, 0.5, 0.1, True, resolved=False), 0.05) == 1.0


def test_the_baseline_against_itself_at_a_tests_smallest_call_is_not_quarantined():
    """H200, Liger's swiglu_forward at B=9,T=7,I=41 (a call of about 1 us, 8192 slots): the two sides' requests
    were 3-4 ms apart, either way, on an extra of about 14 ms beyond an 8 ms pass, while the oracle's own extras
    moved by 1 ms. The baseline against itself, claiming 0.997x, was quarantined as not corroborated (the clock
    saw about 0.7x). That difference between processes is now part of what the clock cannot resolve: the size is
    unresolved (credited no speedup) and nothing is quarantined."""
    args = (walls(345.3, 21.6, 22.7), walls(8.3, 8.3, 8.3), walls(363.7, 25.6, 26.2))
    v = corroborate(*args, 1.013, 1.016, 0.05, 150, shaveable_b=walls(0.6, 0.6, 0.6), slots=8192)
    assert v.judge_speedup < 0.75  # what the clock saw
    assert v.ok and not v.resolved and credit_cap(v, 0.05) == 1.0
    forged = corroborate(*args, 1.013, 1.013 / 3.0, 0.05, 150, shaveable_b=walls(0.6, 0.6, 0.6), slots=8192)
    assert not forged.ok  # a gross forgery is still caught there


def test_a_mid_size_case_whose_sides_agree_stays_resolved():
    """H200, the example's LayerNorm at M=512,N=4096 (731 slots, a pass of about 3.2 ms inside requests of about
    28 ms): both sides' requests within 0.5 ms. The size stays resolved, so an honest speedup there is credited."""
    args = (walls(28.4, 28.2, 28.1), walls(3.2, 3.2, 3.2), walls(28.4, 28.8, 28.2))
    v = corroborate(*args, 4.40, 4.40, 0.05, 150, shaveable_b=walls(0.3, 0.3, 0.3), slots=731)
    assert v.ok and v.resolved


def test_a_slowdown_claimed_as_parity_where_the_clock_cannot_resolve_is_not_credited_parity():
    """(Was a hole: at calls of about 1 us the window's 8192 slots carried a JSON list of commitments in the timed
    request, host work per slot that differs between the two processes; its allowance, 0.5 us a slot, left the size
    unresolved, and credit_cap gave 1.0 whatever the clock saw, so a candidate 1.4x slower there whose worker
    claims parity was credited parity.) The commitments now leave the timed request (one digest in it, the per-slot
    hashes after the clock) and the per-slot allowance is 0.4 us: the size is resolved and the slowdown seen.
    The allowance is a CPU estimate until re-measured on the H200 (runners/judge_clock.py)."""
    # baseline 1.0 us a call, candidate really 1.4 us, its worker claims 1.0 us; 14 ms of extra a request
    args = (walls(300.0, 22.2, 22.5), walls(8.2, 8.2, 8.2), walls(320.0, 25.7, 25.5))
    v = corroborate(*args, 1.0, 1.0, 0.05, 150, shaveable_b=walls(0.6, 0.6, 0.6), slots=8192)
    assert v.judge_speedup < 0.75  # the clock saw the slowdown
    assert not v.ok or credit_cap(v, 0.05) < 0.8


def test_the_windows_lead_grows_with_its_slots():
    """The lead is never credited, so it costs an honest candidate its share of the pass: at a few slots of a large
    call (T=4096 on the H200: about 48 slots, a 1.7 ms pass) a fixed 0.12 ms lead read the baseline against itself
    at 0.86x. It now covers the enqueueing it exists for, which grows with the slots."""
    from types import SimpleNamespace

    from runners.judge_clock import LEAD_CYCLES_PER_SLOT, TimingSteps
    from runners.protocol import Protocol

    sent = []

    class Worker:
        def request(self, op, **kw):
            sent.append(kw["lead_cycles"])
            return {"ok": True}

    judge = SimpleNamespace(p=Protocol(), _spins=lambda: False)
    for count in (48, 731, 8192, 20_000):
        TimingSteps._window(judge, Worker(), seed=1, key=2, count=count)
    assert sent == [48 * LEAD_CYCLES_PER_SLOT, 731 * LEAD_CYCLES_PER_SLOT, 8192 * LEAD_CYCLES_PER_SLOT,
                    Protocol().window_lead_cycles]  # about all of it at 8192 slots, and never more


class _RetryJudge:
    """The timing half of the judge with its workers answering ``ok`` and each measurement of the clock canned:
    ``_corroborate``'s decision alone (quarantine, the retry, the credit)."""

    def __new__(cls, measurements, retries=1):
        from types import SimpleNamespace

        from runners.judge_clock import TimingSteps
        from runners.protocol import Protocol

        class Worker:
            def __init__(self, role):
                self.role = role

            def request(self, op, **kw):
                return {"ok": True}

            def pause(self):
                pass

            def resume(self):
                pass

            def still_running(self):
                return []

        class Judge(TimingSteps):
            def _slot_count(self, *args):
                return 10

            def _per_call_bytes(self, case):
                return 1 << 20

            def _bank_request(self, case, count, seed):
                return {}

            def _clock_rounds(self, case, index, secret, count, bank, reveal, tol, offset, warm=1):
                self.calls.append(offset)
                self.warm.append(warm)
                return self.measurements.pop(0)

        judge = Judge()
        judge.p = Protocol(window_rounds=3, window_retries=retries)
        judge.spec = SimpleNamespace(written=[], tolerances_for=lambda dtype: None)
        judge.oracle, judge.candidate, judge.bystanders, judge.spent = Worker("oracle"), Worker("candidate"), [], {}
        judge.measurements, judge.calls, judge.warm = list(measurements), [], []
        return judge


def _measured(candidate_wall: float) -> tuple:
    """One measurement: three rounds of a 1 ms oracle pass with 0.5 ms around it, the candidate's walls given."""
    return ([1500.0] * 3, [candidate_wall] * 3, [1000.0] * 3, [0.0] * 3, [0.0] * 3, [{}] * 3, [{}] * 3, [0.0] * 3)


def _timed(judge, claimed: float, monkeypatch):
    from runners import judge_clock
    from runners.results import CaseResult
    from runners.task import Case

    monkeypatch.setattr(judge_clock.checkpoints, "draw", lambda *args: {})
    result = CaseResult(case="T=1", baseline_us=10.0, candidate_us=10.0 / claimed)
    judge._corroborate(Case(symbols={"T": 1}, dtype="float16"), 0, 7, result)
    return result


def test_a_near_miss_is_measured_again_before_it_quarantines(monkeypatch):
    """An honest candidate (claims parity) that one measurement of the clock saw at 0.81x, just past what it allows
    (0.97x), is measured again on fresh values: the second agrees, so it is not quarantined (the H200 quarantined the
    LayerNorm baseline against itself once at M=1, by 1.4 %), and the credit stays held to the lower view (0.81x
    plus the tolerance)."""
    judge = _RetryJudge([_measured(1735.0), _measured(1500.0)])
    result = _timed(judge, 1.0, monkeypatch)
    assert judge.calls == [0, 1000]  # the second measurement's rounds draw seeds of their own
    # each window follows a warm-up of about 30 ms of passes (10 slots of 10 us: at most WARM_MAX_REPLAYS of them)
    assert judge.warm == [64, 64]
    assert result.claimed_us == 10.0 and 10.0 / result.candidate_us <= 0.81 * 1.05 + 1e-9


def test_a_claim_far_past_the_clock_or_past_it_twice_is_quarantined(monkeypatch):
    from runners.protocol import Refusal

    judge = _RetryJudge([_measured(1735.0), _measured(1735.0)])
    with pytest.raises(Refusal, match="2 measurement"):
        _timed(judge, 1.0, monkeypatch)
    judge = _RetryJudge([_measured(2300.0), _measured(1500.0)])  # 1.0x claimed, 0.56x seen: no second chance
    with pytest.raises(Refusal, match="1 measurement"):
        _timed(judge, 1.0, monkeypatch)
    assert judge.calls == [0]
    judge = _RetryJudge([_measured(1735.0)], retries=0)
    with pytest.raises(Refusal, match="1 measurement"):
        _timed(judge, 1.0, monkeypatch)
    assert judge.calls == [0]


def test_a_second_chance_credits_a_forged_claim_no_more_than_the_clock_saw(monkeypatch):
    """A worker that claims 1.2x for a kernel the clock sees at 0.97x (just past the allowance), lucky in the second
    measurement (the clock reads 1.15x): not quarantined, but credited only what the first measurement saw, plus
    the tolerance."""
    judge = _RetryJudge([_measured(1530.0), _measured(1370.0)])
    result = _timed(judge, 1.2, monkeypatch)
    assert judge.calls == [0, 1000]
    assert 10.0 / result.candidate_us <= (1000.0 / 1030.0) * (1 + judge.p.corroboration_tolerance) + 1e-9


class _QuarantiningJudge:
    """The judge's protocol steps for ``evaluate``'s order alone: every trial passes until the re-check's trials
    (``first=1``), where the candidate is ``wrong_once_timed`` or not; the clock always disagrees."""

    def __init__(self, wrong_once_timed: bool):
        from types import SimpleNamespace

        from runners.protocol import Protocol

        self.wrong_once_timed, self.p, self.spent, self.released = wrong_once_timed, Protocol(), {}, 0
        self.backend = SimpleNamespace(timed=True)
        self.spec = SimpleNamespace(reference=None)
        self.exchange = SimpleNamespace(clear=lambda: None)
        self.checked = []

    def check_case(self, case, index, secret, trials, result, first=0, layouts=True, masks=True):
        from runners.protocol import Refusal

        self.checked.append(first)
        if first and self.wrong_once_timed:
            raise Refusal("correctness", "trial 1: outputs differ")

    def time_case(self, case, index, secret, result):
        from runners.judge_clock import Quarantine

        raise Quarantine(f"{case.id}: the candidate's claimed speedup 1.04x is above what the judge's clock saw")

    def release(self):
        self.released += 1


@pytest.mark.parametrize("wrong", [True, False])
def test_a_quarantined_candidate_is_rechecked_and_a_wrong_one_reported_wrong(wrong):
    """A corner cut taken only once timed, whose claim the clock also disagreed with (CI's CPU stand-in, round 17):
    the re-check still runs, and the verdict names the wrong outputs, which a search can act on; a right candidate
    stays quarantined."""
    from runners.judge import evaluate
    from runners.results import Evaluation
    from runners.task import Case

    judge = _QuarantiningJudge(wrong)
    ev = evaluate(judge, [Case(symbols={"T": 4}, dtype="float16")], 7, 2, True, False,
                  Evaluation(stage="correctness"), None)
    assert not ev.ok and judge.checked == [0, 1] and judge.released
    if wrong:
        assert ev.stage == "correctness" and "trial 1" in ev.error and "quarantined too" in ev.error
    else:
        assert ev.stage == "timing" and "judge's clock saw" in ev.error
