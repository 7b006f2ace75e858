"""Budgets of a search (rounds, evaluations, wall-clock, tokens, money, stagnation) and the presets."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Budget:
    evaluations: int | None = None  # candidates evaluated (the baseline is not counted)
    rounds: int | None = None  # a round is ``round_size`` proposals
    wall_s: float | None = None  # seconds of search, summed over resumes
    tokens: int | None = None  # LLM tokens, all models
    money: float | None = None  # US dollars, all models
    stagnation: int | None = None  # evaluations in a row without a better best

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Counters:
    proposals: int = 0
    evaluated: int = 0
    duplicates: int = 0
    rejected: int = 0
    since_improvement: int = 0
    elapsed_s: float = 0.0


def stop_reason(budget: Budget, n: Counters, in_progress: int, round_size: int, tokens: int,
                money: float, elapsed_s: float) -> str | None:
    """Why no new proposal may start now, or None."""
    if budget.evaluations is not None and n.evaluated + in_progress >= budget.evaluations:
        return "evaluations"
    if budget.rounds is not None and n.proposals >= budget.rounds * max(1, round_size):
        return "rounds"
    if budget.wall_s is not None and elapsed_s >= budget.wall_s:
        return "wall-clock"
    if budget.tokens is not None and tokens >= budget.tokens:
        return "tokens"
    if budget.money is not None and money >= budget.money:
        return "money"
    if budget.stagnation is not None and n.since_improvement >= budget.stagnation:
        return "stagnation"
    return None


# The Kernel-Smith paper's protocol: 40 rounds at temperature 0.6, top-p 0.95.
PRESETS = {
    "kernel-smith": {"rounds": 40, "temperature": 0.6, "top_p": 0.95},
    "default": {"rounds": None, "temperature": 0.8, "top_p": None},
}
