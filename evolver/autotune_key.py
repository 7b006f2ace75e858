"""Re-keying an ``@triton.autotune`` kernel: which run-time arguments may join its key, and the edits that takes.

Triton's autotuner picks a config once per value of its key. A key that leaves out the row count (the token
count of a norm, ``T * heads`` of a per-head norm) makes the config chosen at the first call serve every later
shape, decode and prefill alike. Two ways to put the row count ``M`` in the key:

- **exact**: ``key=[..., "M"]``, one autotuning run per value of ``M``: every batch size a server sees re-tunes;
- **bucketed**: the kernel gets one more argument, ``M_bucket=0`` (its body never reads it), that each launch site
  the entry reaches passes as ``int(M).bit_length()``, and ``key=[..., "M_bucket"]``: one autotuning run per power
  of two of ``M``. Offered only where every such launch site passes ``M`` as a side-effect-free expression and the
  kernel's parameters are plain positional ones.

Bucketed keys come first: they are what one would merge. Edits are (line, col, end line, end col, text) spans in
the module's source, applied by :func:`evolver.launch_params.render`.
"""
from __future__ import annotations

import ast

BUCKET = "_bucket"
_PURE_CALLS = {"len", "int", "min", "max", "abs"}  # builtins a launch site may wrap a size in
_PURE_METHODS = {"numel", "size", "dim", "stride"}


def bucket_param(param: str) -> str:
    return f"{param}{BUCKET}"


def bucket_value(expr: str) -> str:
    """The value a launch site passes for the bucket of ``expr``: its power of two (1 for 1, 2 for 2-3, ...)."""
    return f"int({expr}).bit_length()"


def _pure(expr: ast.expr) -> bool:
    """A size expression that may be evaluated twice: names, attributes, indexing, arithmetic, sizes."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            allowed = _PURE_CALLS if isinstance(node.func, ast.Name) else _PURE_METHODS
            if name not in allowed or node.keywords:
                return False
        elif isinstance(node, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda, ast.Starred,
                               ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return False
    return True


def _plain_signature(fn: ast.FunctionDef) -> bool:
    a = fn.args
    return not (a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs)


def bound_argument(call: ast.Call, fn: ast.FunctionDef, param: str) -> ast.expr | None:
    """The expression a launch ``kernel[grid](...)`` passes for ``param`` (None: not passed, or passed by *args)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    names = [a.arg for a in fn.args.args]
    index = names.index(param)
    if index < len(call.args):
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == param), None)


def bucketable(fn: ast.FunctionDef, sites: list[ast.Call], param: str) -> bool:
    """Whether ``param`` can be bucketed: a plain signature without a parameter of the bucket's name, and every
    launch site passes ``param`` as a side-effect-free expression."""
    names = {a.arg for a in fn.args.args}
    if not sites or not _plain_signature(fn) or bucket_param(param) in names or param not in names:
        return False
    for call in sites:
        expr = bound_argument(call, fn, param)
        if expr is None or not _pure(expr):
            return False
    return True


def key_choices(key: list[str], scalars: list[str], fn: ast.FunctionDef | None,
                sites: list[ast.Call]) -> list[tuple[str, str]]:
    """(key text, label) of each re-keying: the bucketed ones first, then one exact key per scalar argument."""
    free = [p for p in scalars if p not in key]
    bucketed = [(repr([*key, bucket_param(p)]), f"{[*key, bucket_param(p)]} (re-tune per power of two of {p})")
                for p in free if fn is not None and bucketable(fn, sites, p)]
    exact = [(repr([*key, p]), f"{[*key, p]} (re-tune per value of {p})") for p in free]
    return bucketed + exact


def key_edits(source: str, fn: ast.FunctionDef, sites: list[ast.Call], new_key: list[str]) -> list[tuple]:
    """The spans to edit besides the key itself: for each bucket the new key names, a parameter with a default
    at the end of the kernel's signature and a keyword at each launch site."""
    names = [a.arg for a in fn.args.args]
    edits: list[tuple] = []
    for name in new_key:
        param = name[: -len(BUCKET)] if name.endswith(BUCKET) else None
        if param is None or name in names or param not in names:
            continue
        last = fn.args.args[-1]
        defaults = fn.args.defaults
        end = defaults[-1] if defaults else last  # a default belongs to the last parameters
        edits.append((end.end_lineno, end.end_col_offset, end.end_lineno, end.end_col_offset, f", {name}=0"))
        for call in sites:
            expr = ast.get_source_segment(source, bound_argument(call, fn, param))
            after = (call.args + call.keywords)[-1]
            edits.append((after.end_lineno, after.end_col_offset, after.end_lineno, after.end_col_offset,
                          f", {name}={bucket_value(expr)}"))
    return edits
