"""A candidate kernel source and where it came from."""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field

from runners.results import Evaluation


def source_sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def normalized_key(source: str) -> str:
    """Same key for sources that differ only in formatting or comments (exact duplicates by AST)."""
    try:
        return hashlib.sha256(ast.dump(ast.parse(source)).encode()).hexdigest()
    except SyntaxError:
        return source_sha256(source)


@dataclass
class Candidate:
    id: int
    source: str
    operator: str  # baseline | tuner | llm-rewrite | ...
    parent_id: int | None = None
    generation: int = 0
    genome: dict = field(default_factory=dict)  # operator-specific description of the change
    evaluation: Evaluation | None = None

    @property
    def fitness(self) -> float | None:
        return self.evaluation.fitness if self.evaluation else None

    @property
    def correct(self) -> bool:
        return bool(self.evaluation and self.evaluation.ok)

    @property
    def sha256(self) -> str:
        return source_sha256(self.source)
