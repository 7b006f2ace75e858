"""The archive: every evaluated candidate, the elites among them, and duplicate detection.

A first, single-island archive ranked by fitness; the global best is never evicted because nothing is.
Islands and a MAP-Elites grid can replace ``elites`` without changing the loop.
"""
from __future__ import annotations

from .candidate import Candidate, normalized_key


class Archive:
    def __init__(self) -> None:
        self.candidates: list[Candidate] = []
        self._keys: set[str] = set()

    def __len__(self) -> int:
        return len(self.candidates)

    def next_id(self) -> int:
        return len(self.candidates)

    def seen(self, source: str) -> bool:
        return normalized_key(source) in self._keys

    def add(self, candidate: Candidate) -> None:
        self._keys.add(normalized_key(candidate.source))
        self.candidates.append(candidate)

    def correct(self) -> list[Candidate]:
        return [c for c in self.candidates if c.correct]

    def elites(self, k: int) -> list[Candidate]:
        """The k best correct candidates; unranked (untimed) ones keep arrival order."""
        ranked = sorted(self.correct(), key=lambda c: c.fitness if c.fitness is not None else 0.0, reverse=True)
        return ranked[:k]

    def best(self) -> Candidate | None:
        timed = [c for c in self.correct() if c.fitness is not None]
        return max(timed, key=lambda c: c.fitness) if timed else None

    @property
    def failures(self) -> int:
        return sum(1 for c in self.candidates if c.evaluation and not c.evaluation.ok)
