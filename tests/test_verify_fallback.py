"""When the best candidate of the search fails the full protocol, the next ones above the bar are re-run before a
run says "no improvement" (bot/verify.py `decide`): a candidate whose screening result did not hold must not
hide an honest one that does."""
from types import SimpleNamespace

import bot.verify as verify
from evolver.archive import Archive
from evolver.candidate import Candidate
from runners.results import CaseResult, Evaluation


def _cand(i: int, speedup: float) -> Candidate:
    ev = Evaluation(stage="done", ok=True, timed=True,
                    cases=[CaseResult(case="T=1/float16", correct=True, baseline_us=speedup, candidate_us=1.0)])
    return Candidate(id=i, source=f"# candidate {i}\n", operator="rewrite", evaluation=ev)


def _decide(monkeypatch, fitnesses: list[float], failing: set[int]):
    archive = Archive()
    for i, f in enumerate([1.0, *fitnesses]):
        archive.add(_cand(i, f))
    tried = []

    def fake_verify(job, opts, evaluator, cand):
        tried.append(cand.id)
        check = cand.evaluation
        return (check, f"candidate {cand.id} did not hold", None) if cand.id in failing else (check, "", {"passed": 1})

    monkeypatch.setattr(verify, "verify_candidate", fake_verify)
    job = SimpleNamespace(backend="triton")
    opts = SimpleNamespace(min_speedup=1.03)
    progress = SimpleNamespace(stage=lambda *a, **k: None)
    return verify.decide(job, opts, archive, None, progress), tried


def test_the_next_best_candidate_is_verified_when_the_best_fails(monkeypatch):
    decision, tried = _decide(monkeypatch, [1.5, 1.2, 1.01, 1.1], failing={1})
    assert tried == [1, 2] and decision.verdict == "improved" and decision.champion.id == 2


def test_at_most_three_candidates_and_only_above_the_bar(monkeypatch):
    decision, tried = _decide(monkeypatch, [1.5, 1.2, 1.01, 1.1, 1.04], failing={1, 2, 4, 5})
    assert tried == [1, 2, 4] and decision.verdict == "no_improvement"
    assert decision.reason.startswith("A candidate looked faster, but candidate 1 did not hold (2 more above")
