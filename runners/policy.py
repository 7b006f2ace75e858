"""Static policy: reject candidate sources that could fool the evaluator, before any device time is spent.

A candidate runs in the same process as the oracle and the timer, so anything that can reach them (streams,
threads, timers, the garbage collector, introspection, files, the environment, other modules through
``sys.modules``, monkey-patching torch or Triton) is refused. Imports are allowed only from the baseline's own
imports plus a short safe list, and a forbidden module cannot be reached as an attribute (``torch.os``) or
imported by name (``from torch import os``) either. A construct the baseline itself uses is tolerated in a
candidate (a kernel module that reads ``os.environ`` can still be tuned); runners/integrity.py checks at
run time that torch, Triton and the harness were left as they were.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .extract import entry_signature
from .syntax import parse

SAFE_MODULES = {"torch", "triton", "math", "functools", "typing", "__future__", "dataclasses"}
FORBIDDEN_MODULES = {
    "os", "sys", "subprocess", "threading", "multiprocessing", "concurrent", "asyncio", "ctypes", "cffi",
    "gc", "inspect", "time", "timeit", "signal", "socket", "importlib", "builtins", "pickle", "marshal",
    "shutil", "pathlib", "io", "tempfile", "random", "atexit", "weakref", "runpy", "code",
}
FORBIDDEN_CALLS = {"open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                   "getattr", "setattr", "delattr", "input", "id", "memoryview"}
# Attribute names that reach streams, events, graphs, timers or interpreter internals.
FORBIDDEN_ATTRS = {
    "Stream", "stream", "set_stream", "current_stream", "default_stream", "ExternalStream", "Event",
    "CUDAGraph", "graph", "is_current_stream_capturing", "synchronize", "environ", "getenv", "modules", "perf_counter",
    "__globals__", "__code__", "__dict__", "__builtins__", "__subclasses__", "__class__", "__bases__",
    "__closure__", "__loader__", "__spec__", "f_back", "f_globals", "gi_frame",
    "_version", "_cdata",  # tensor identity: remembering inputs across calls
}


@dataclass
class PolicyViolation:
    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule}: {self.detail}"


def _top(name: str) -> str:
    return name.split(".")[0]


def allowed_modules(baseline_source: str) -> set[str]:
    """Top-level modules the baseline imports, minus the forbidden ones, plus the safe list."""
    mods = set(SAFE_MODULES)
    for node in ast.walk(parse(baseline_source)):
        if isinstance(node, ast.Import):
            mods.update(_top(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods.add(_top(node.module))
    return mods - FORBIDDEN_MODULES


def _forbidden_attr(name: str) -> bool:
    return name in FORBIDDEN_ATTRS or name in FORBIDDEN_MODULES or (name.startswith("__") and name.endswith("__"))


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _attribute_targets(node: ast.AST) -> list[ast.Attribute]:
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = node.targets
    else:
        return []
    flat = []
    for t in targets:
        flat.extend(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
    return [t for t in flat if isinstance(t, ast.Attribute)]


def _violations(tree: ast.Module, allowed: set[str]) -> list[PolicyViolation]:
    found: list[PolicyViolation] = []

    def bad(node: ast.AST, rule: str, detail: str) -> None:
        found.append(PolicyViolation(getattr(node, "lineno", 0), rule, detail))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] not in allowed or any(p in FORBIDDEN_MODULES for p in parts[1:]):
                    bad(node, "import", f"`import {alias.name}` is not allowed")
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            if node.level == 0 and (parts[0] not in allowed or any(p in FORBIDDEN_MODULES for p in parts[1:])):
                bad(node, "import", f"`from {node.module} import ...` is not allowed")
            for alias in node.names:
                if alias.name in FORBIDDEN_MODULES or _forbidden_attr(alias.name):
                    bad(node, "import", f"`from {'.' * node.level}{node.module or ''} import {alias.name}` is not allowed")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            bad(node, "call", f"`{node.func.id}()` is not allowed")
        elif isinstance(node, ast.Attribute) and _forbidden_attr(node.attr):
            bad(node, "attribute", f"`.{node.attr}` is not allowed (streams, timers, globals and internals)")
        elif isinstance(node, ast.Name) and node.id in {"__builtins__", "__loader__", "__spec__"}:
            bad(node, "name", f"`{node.id}` is not allowed")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bad(node, "global", "module-level state written from functions is not allowed (caching across calls)")
        for target in _attribute_targets(node):
            root = _root(target)
            if not (isinstance(root, ast.Name) and root.id == "self"):
                bad(node, "patch", f"assigning `{ast.unparse(target)}` is not allowed (monkey-patching)")
    return found


def check_source(source: str, baseline: str, entry: str) -> list[PolicyViolation]:
    """Every policy violation in ``source`` (empty list: the candidate may be run)."""
    try:
        tree = parse(source)
    except SyntaxError as exc:
        return [PolicyViolation(exc.lineno or 0, "syntax", exc.msg)]
    allowed = allowed_modules(baseline)
    tolerated = {(v.rule, v.detail) for v in _violations(parse(baseline), allowed)}
    found = [v for v in _violations(tree, allowed) if (v.rule, v.detail) not in tolerated]

    want = entry_signature(baseline, entry)
    got = entry_signature(source, entry)
    if got is None:
        found.append(PolicyViolation(0, "signature", f"entry function `{entry}` is missing (it must be a "
                                                     f"top-level `def {entry}(...)` in the module)"))
    elif got != want:
        found.append(PolicyViolation(0, "signature", f"`{entry}({got})` differs from the baseline's `{entry}({want})`"))
    return found


def decorator_names(fn: ast.FunctionDef) -> set[str]:
    """The last name of each decorator (``triton.jit`` and ``jit`` are both ``jit``)."""
    names = set()
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


def defines_triton_kernel(source: str) -> bool:
    """Whether the module defines a ``@triton.jit`` function (decorated directly, or under autotune or
    heuristics). A first, static half of the rule that a candidate must launch a kernel of its own; the judge
    checks the launches at run time."""
    try:
        tree = parse(source)
    except SyntaxError:
        return True  # the syntax error is reported on its own
    return any(isinstance(node, ast.FunctionDef) and "jit" in decorator_names(node) for node in ast.walk(tree))
