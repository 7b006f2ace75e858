"""A candidate kernel source, where it came from, and what it cost to make."""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field

from runners.results import Evaluation
from runners.syntax import parse


def source_sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


class _StripDocstrings(ast.NodeTransformer):
    def _strip(self, node):
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _strip


def normalized_key(source: str) -> str:
    """Same key for sources that differ only in formatting, comments or docstrings (normalised AST)."""
    try:
        tree = _StripDocstrings().visit(parse(source))
        return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()
    except (SyntaxError, ValueError, RecursionError):
        return source_sha256(source)


@dataclass
class Candidate:
    id: int
    source: str
    operator: str  # baseline | tuner | rewrite | diff | ...
    parent_id: int | None = None
    generation: int = 0
    genome: dict = field(default_factory=dict)  # operator-specific description of the change
    evaluation: Evaluation | None = None
    island: int = 0
    # LLM operators: the calls that produced this candidate (prompt, response, model, tokens, cost, error).
    calls: list = field(default_factory=list)
    rejected: str = ""  # why a proposal never reached the evaluator (no code, bad diff, edit outside the region)
    inspirations: list[int] = field(default_factory=list)

    @property
    def fitness(self) -> float | None:
        return self.evaluation.fitness if self.evaluation else None

    @property
    def correct(self) -> bool:
        return bool(self.evaluation and self.evaluation.ok)

    @property
    def sha256(self) -> str:
        return source_sha256(self.source)

    @property
    def model(self) -> str | None:
        return self.calls[-1].model if self.calls else None
