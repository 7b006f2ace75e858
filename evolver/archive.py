"""The archive: every candidate, islands of MAP-Elites grids, selection, migration and duplicate detection.

Each island keeps a grid over kernel descriptors (evolver/descriptors.py): one elite per cell, the fittest
correct candidate of that design. Islands evolve apart and, every ``migration_interval`` additions, send
their best to the next island in a ring. The global best is tracked apart from the grids and never evicted.
Timed candidates rank by fitness (geomean speedup); on the CPU interpreter correct candidates are untimed
and rank equal, ahead of every incorrect one.
"""
from __future__ import annotations

import random
import threading

from .candidate import Candidate, normalized_key, source_sha256
from .descriptors import bytes_moved, describe


def rank(candidate: Candidate) -> float:
    """Selection score: fitness when timed, 1.0 for correct but untimed, -1 for incorrect."""
    if not candidate.correct:
        return -1.0
    return candidate.fitness if candidate.fitness is not None else 1.0


class Island:
    def __init__(self, index: int):
        self.index = index
        self.cells: dict[tuple, Candidate] = {}
        self.members: list[Candidate] = []  # every candidate born or migrated here, incorrect ones too

    def elites(self) -> list[Candidate]:
        return sorted(self.cells.values(), key=lambda c: (rank(c), -c.id), reverse=True)

    def best(self) -> Candidate | None:
        elites = self.elites()
        return elites[0] if elites else None

    def place(self, candidate: Candidate, cell: tuple) -> bool:
        incumbent = self.cells.get(cell)
        if incumbent is None or rank(candidate) > rank(incumbent):
            self.cells[cell] = candidate
            return True
        return False


class Archive:
    def __init__(self, islands: int = 1, migration_interval: int = 10, child_penalty: float = 0.5):
        self.candidates: list[Candidate] = []
        self.islands = [Island(i) for i in range(max(1, islands))]
        self.migration_interval = migration_interval
        self.child_penalty = child_penalty
        self.children: dict[int, int] = {}
        self.migrations = 0
        self._keys: set[str] = set()
        self._shas: set[str] = set()
        self._best: Candidate | None = None
        self._baseline_bytes: int | None = None
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self.candidates)

    def next_id(self) -> int:
        with self._lock:
            return max((c.id for c in self.candidates), default=-1) + 1

    def seen(self, source: str) -> bool:
        """An exact or normalised-AST duplicate of a candidate already in the archive."""
        with self._lock:
            return source_sha256(source) in self._shas or normalized_key(source) in self._keys

    def remember(self, source: str) -> None:
        with self._lock:
            self._shas.add(source_sha256(source))
            self._keys.add(normalized_key(source))

    def add(self, candidate: Candidate) -> None:
        with self._lock:
            self.remember(candidate.source)
            self.candidates.append(candidate)
            if candidate.parent_id is not None:
                self.children[candidate.parent_id] = self.children.get(candidate.parent_id, 0) + 1
            first = len(self.candidates) == 1
            if first:  # the baseline: its bytes anchor the bytes-moved descriptor
                self._baseline_bytes = bytes_moved(candidate)
            if candidate.parent_id is None and len(self.islands) > 1 and first:
                for island in self.islands:  # every island starts from the baseline
                    self._place(island, candidate)
            else:
                self._place(self.islands[candidate.island % len(self.islands)], candidate)
            best = self._best
            if candidate.correct and (best is None or rank(candidate) > rank(best)):
                self._best = candidate
            if len(self.islands) > 1 and self.migration_interval and \
                    len(self.candidates) % self.migration_interval == 0:
                self.migrate()

    def _place(self, island: Island, candidate: Candidate) -> None:
        island.members.append(candidate)
        if candidate.correct:
            island.place(candidate, describe(candidate, self._baseline_bytes).key)

    def migrate(self) -> None:
        """Ring migration: each island's best enters the next island's grid."""
        with self._lock:
            bests = [island.best() for island in self.islands]
            for i, best in enumerate(bests):
                if best is not None:
                    dest = self.islands[(i + 1) % len(self.islands)]
                    if best not in dest.members:
                        self._place(dest, best)
            self.migrations += 1

    def correct(self) -> list[Candidate]:
        with self._lock:
            return [c for c in self.candidates if c.correct]

    def elites(self, k: int, island: int | None = None) -> list[Candidate]:
        """The k best correct candidates (of one island, or of all); untimed ones keep arrival order."""
        with self._lock:
            pool = self.islands[island % len(self.islands)].elites() if island is not None else \
                sorted(self.correct(), key=lambda c: (rank(c), -c.id), reverse=True)
            return pool[:k]

    def best(self) -> Candidate | None:
        """The fittest timed candidate ever seen: tracked apart from the grids, never evicted."""
        with self._lock:
            best = self._best
            return best if best is not None and best.fitness is not None else None

    def best_correct(self) -> Candidate | None:
        with self._lock:
            return self._best

    def select_parent(self, rng: random.Random, island: int) -> Candidate:
        """A parent from the island's grid, weighted by rank and penalised for the children it already has."""
        with self._lock:
            elites = self.islands[island % len(self.islands)].elites() or self.elites(8) or self.candidates[:1]
            weights = [max(rank(c), 0.05) / (1.0 + self.child_penalty * self.children.get(c.id, 0)) for c in elites]
            return rng.choices(elites, weights=weights, k=1)[0]

    def inspirations(self, rng: random.Random, island: int, parent: Candidate, k: int = 3) -> list[Candidate]:
        """The island's top elites and elites of other, randomly chosen cells (diverse designs)."""
        with self._lock:
            elites = [c for c in self.islands[island % len(self.islands)].elites() if c.id != parent.id]
            top = elites[: max(1, k // 2)]
            rest = [c for c in elites if c not in top]
            return top + rng.sample(rest, k=min(len(rest), k - len(top)))

    def recent_failures(self, island: int | None = None, k: int = 3) -> list[Candidate]:
        with self._lock:
            pool = self.islands[island % len(self.islands)].members if island is not None else self.candidates
            return [c for c in pool if c.evaluation and not c.evaluation.ok][-k:]

    @property
    def failures(self) -> int:
        return sum(1 for c in self.candidates if c.evaluation and not c.evaluation.ok)
