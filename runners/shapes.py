"""Shape expressions of a config (``[T, "2*I"]``), evaluated without torch: the bot reads configs without loading it."""
from __future__ import annotations

import ast
import operator

from .syntax import parse

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


def eval_dim(dim, symbols: dict) -> int:
    """A shape entry: an int, a symbol (``H``) or a small expression of symbols (``2*I``, ``H//2``)."""
    if isinstance(dim, int):
        return dim

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in symbols:
                raise KeyError(f"shape symbol {node.id!r} has no value in this case")
            return int(symbols[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"unsupported shape expression {dim!r} (use ints, symbols, + - * //)")

    return ev(parse(str(dim), mode="eval").body)


def view_span(shape, strides) -> int:
    """Elements from a view's first place to its last, inclusive, for non-negative strides (1 + the sum of (n - 1)
    times the stride): the storage a view of that shape and those strides needs past its offset."""
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))
