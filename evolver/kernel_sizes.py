"""The value a launch passes for one scalar argument of a kernel, at each case of the task, read without running it.

A choice of config by shape (evolver/autotune_choice.py) sorts the cases by the size the kernel sees, e.g. the
``n_rows`` a norm's launcher passes: ``T * H`` for a ``[T, H, D]`` input. Nothing of the target is imported (the
search process never runs target code): the launch's expression for the argument is evaluated over the entry's
straight-line assignments, with each tensor argument standing for its shape in the case (``x.shape[0]``,
``x.size(-1)``, ``x.numel()``, ``x.view(-1, D)``, arithmetic). Where that fails (a helper of another module
reshapes the input), the value is read as the rows of the first tensor argument of two or more dimensions (all
dimensions but the last multiplied), the usual meaning of a row count, and said so in ``how``.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from runners.shapes import eval_dim

from .autotune_key import bound_argument


class _Unknown(Exception):
    pass


@dataclass(frozen=True)
class Shape:
    dims: tuple[int, ...]


@dataclass(frozen=True)
class CaseSize:
    value: int
    how: str  # how it was read: the launch's expression evaluated, or the rows of the first tensor


def _reshape(dims: tuple[int, ...], new: list[int]) -> Shape:
    total = math.prod(dims)
    if new.count(-1) > 1:
        raise _Unknown("reshape")
    known = math.prod(d for d in new if d != -1)
    return Shape(tuple(total // known if d == -1 and known else d for d in new))


def _call(node: ast.Call, env: dict):
    func = node.func
    args = [_value(a, env) for a in node.args]
    if isinstance(func, ast.Name):
        table = {"int": lambda v: int(v), "len": lambda v: v.dims[0] if isinstance(v, Shape) else len(v),
                 "min": min, "max": max, "abs": abs}
        if func.id in table and not node.keywords:
            return table[func.id](*args)
        raise _Unknown(func.id)
    if not isinstance(func, ast.Attribute):
        raise _Unknown("call")
    if func.attr == "cdiv" and len(args) == 2:
        return -(-args[0] // args[1])
    if func.attr == "prod" and len(args) == 1:
        return math.prod(args[0])
    owner = _value(func.value, env)
    if not isinstance(owner, Shape) or node.keywords:
        raise _Unknown(func.attr)
    dims = owner.dims
    if func.attr == "size":
        return dims[args[0]] if args else dims
    if func.attr == "numel":
        return math.prod(dims)
    if func.attr == "dim":
        return len(dims)
    if func.attr in ("contiguous", "clone", "float", "half", "bfloat16", "to"):
        return owner
    if func.attr in ("view", "reshape"):
        new = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        return _reshape(dims, list(new))
    if func.attr == "flatten":
        start, end = (list(args) + [0, -1])[:2] if len(args) < 2 else args[:2]
        start, end = start % len(dims), end % len(dims)
        return Shape(dims[:start] + (math.prod(dims[start:end + 1]),) + dims[end + 1:])
    raise _Unknown(func.attr)


_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


def _value(node: ast.expr, env: dict):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, ast.Attribute):
        owner = _value(node.value, env)
        if isinstance(owner, Shape) and node.attr == "shape":
            return owner.dims
        if isinstance(owner, Shape) and node.attr == "ndim":
            return len(owner.dims)
        raise _Unknown(node.attr)
    if isinstance(node, ast.Subscript):
        owner, index = _value(node.value, env), node.slice
        if isinstance(index, ast.Slice):
            parts = [_value(p, env) if p is not None else None for p in (index.lower, index.upper, index.step)]
            return owner[slice(*parts)]
        return owner[_value(index, env)]
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_value(e, env) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand, env)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left, env), _value(node.right, env))
    if isinstance(node, ast.Call):
        return _call(node, env)
    if isinstance(node, ast.IfExp):
        return _value(node.body if _value(node.test, env) else node.orelse, env)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)) \
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
        if isinstance(node.left, ast.Name) and node.left.id not in env:
            raise _Unknown(node.left.id)
        return (_value(node.left, env) is None) == isinstance(node.ops[0], ast.Is)  # `residual is None`
    raise _Unknown(type(node).__name__)


def _assign(target: ast.expr, value, env: dict) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple) and len(value) == len(target.elts):
        for t, v in zip(target.elts, value):
            _assign(t, v, env)
    else:
        for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
            env.pop(name, None)


def _bindings(fn: ast.FunctionDef, before: int, env: dict) -> dict:
    """The entry's top-level assignments before line ``before``, each evaluated or forgotten."""
    for stmt in fn.body:
        if stmt.lineno >= before:
            break
        if isinstance(stmt, ast.Assign):
            try:
                value = _value(stmt.value, env)
            except (_Unknown, TypeError, IndexError, ValueError, ZeroDivisionError, KeyError):
                value = None
            for target in stmt.targets:
                if value is None:  # not readable: the name means nothing known from here on
                    for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                        env.pop(name, None)
                else:
                    _assign(target, value, env)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
            env.pop(stmt.target.id, None)
    return env


def case_sizes(tree: ast.Module, entry: str, kernel_fn: ast.FunctionDef, sites: list[ast.Call], scalar: str,
               spec, expr: ast.expr | None = None) -> dict[str, CaseSize]:
    """{case id: the value of ``scalar`` at that case} for the cases of ``spec`` (a runners.task.TaskSpec), from
    the first launch site of the kernel the entry makes (or ``expr``, an expression of the launcher: a size only
    the grid uses); a case whose value cannot be read is left out."""
    entry_fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry), None)
    site = next((c for c in sites if entry_fn is not None and entry_fn.lineno <= c.lineno <= entry_fn.end_lineno),
                None)
    if expr is None:
        expr = bound_argument(site, kernel_fn, scalar) if site is not None else None
    text = ast.unparse(expr) if expr is not None else scalar
    out: dict[str, CaseSize] = {}
    for case in list(spec.cases) + list(getattr(spec, "held_out", [])):
        env: dict = {}
        first_rows: tuple[str, int] | None = None
        for arg in spec.args:
            if arg.when is not None and not case.symbols.get(arg.when):
                env[arg.name] = None
                continue
            if arg.shape is not None:
                try:
                    dims = tuple(eval_dim(d, case.symbols) for d in arg.shape)
                except (KeyError, ValueError):
                    continue
                env[arg.name] = Shape(dims)
                if first_rows is None and len(dims) >= 2:
                    first_rows = (arg.name, math.prod(dims[:-1]))
            else:
                value = case.values.get(arg.name, arg.value)
                if value is not None:
                    env[arg.name] = value
        value = None
        if expr is not None and entry_fn is not None:
            try:
                value = _value(expr, _bindings(entry_fn, site.lineno, env))
            except (_Unknown, TypeError, IndexError, ValueError, ZeroDivisionError, KeyError):
                value = None
        if isinstance(value, int) and not isinstance(value, bool):
            out[case.id] = CaseSize(value, f"the launch's `{text}` at the cases' shapes")
        elif first_rows is not None:
            out[case.id] = CaseSize(first_rows[1], f"`{text}` read as the rows of {first_rows[0]}, every dimension "
                                                   f"but the last")
    return out
