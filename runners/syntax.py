"""Parsing Python source into an AST, one thread at a time.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state, so two threads
parsing at once (the search's proposal threads and its evaluation threads do) can fail with
``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905, seen in this
project's CI). Every parse in kernelsmith goes through :func:`parse`, which holds one lock; a test
keeps direct ``ast.parse`` calls out of the code.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse`` under the process-wide parse lock."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def literal(node_or_text: str | ast.AST) -> object:
    """``ast.literal_eval`` of a node, or of source text parsed under the lock."""
    if isinstance(node_or_text, str):
        node_or_text = parse(node_or_text.lstrip(" \t"), mode="eval")
    return ast.literal_eval(node_or_text)
