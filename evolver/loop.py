"""The search loop: propose, reject duplicates, evaluate, archive, until the budget is spent."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from runners.results import Evaluation

from .archive import Archive
from .candidate import Candidate
from .operators import Operator

MAX_DUPLICATE_STREAK = 50  # the operator's space is exhausted after this many duplicates in a row


@dataclass
class SearchSummary:
    evaluated: int
    failures: int
    duplicates_rejected: int
    exhausted: bool


def evolve(archive: Archive, operator: Operator, evaluate: Callable[[Candidate], Evaluation], budget: int,
           rng: random.Random, on_result: Callable[[Candidate], None] = lambda c: None) -> SearchSummary:
    """Spend up to ``budget`` evaluations on new candidates. The archive must already hold the baseline."""
    evaluated = duplicates = streak = 0
    exhausted = False
    while evaluated < budget:
        candidate = operator.propose(archive, rng)
        if candidate is None or streak >= MAX_DUPLICATE_STREAK:
            exhausted = True
            break
        if archive.seen(candidate.source):  # no device time for exact or formatting-only duplicates
            duplicates += 1
            streak += 1
            continue
        streak = 0
        candidate.id = archive.next_id()
        candidate.evaluation = evaluate(candidate)
        archive.add(candidate)
        evaluated += 1
        on_result(candidate)
    return SearchSummary(evaluated, archive.failures, duplicates, exhausted)
