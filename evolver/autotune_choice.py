"""A choice of config by shape for an ``@triton.autotune`` kernel whose key cannot tell its shapes apart.

When pinned-config candidates (evolver/launch_params.py, knob ``configs``) were timed at every case, and one
config is fastest at few rows and another at many (the example's QK-norm on the H200: one row per program at
decode, eight at prefill, 4.7x apart), neither pin nor the autotuner wins everywhere: the autotuner picks once
per key, and at decode its pick is a lottery between near-equal configs. This module writes the deterministic
alternative as one candidate:

- the size: the run-time argument the key misses (the one a bucketed key would add: evolver/autotune_key.py), or,
  where no argument carries it, a size of the launcher that only the grid uses (``M`` in ``grid = lambda meta:
  (cdiv(N, meta["BLOCK_N"]), M)``, Liger's DyT), which then becomes a new argument ``M_bucket`` that the launch
  passes as ``int(M).bit_length()``; read at each case from the shapes (evolver/kernel_sizes.py) and bucketed to
  its power of two;
- per bucket with cases, the pinned config fastest there (geometric mean of its time over the best pin's time at
  the bucket's cases); a bucket between measured ones takes the nearest measured bucket (the smaller on a tie),
  below the smallest the smallest, above the largest the largest; adjacent buckets with the same config merge;
- rendered as a small table ``(largest size, config)`` and a module-level ``early_config_prune`` function that
  returns the one config of the table for the call's size (Triton then benchmarks nothing: one config left), the
  original configs list and the key re-keyed on the size (bucketed where every launch can pass the bucket, else
  exact) so that each bucket gets its own entry in the autotuner's cache. Triton's autotuner calls
  ``early_config_prune(configs, named_args, **kwargs)`` once per new key (Triton 2.2 to 3.9); with one config left,
  recent versions run it without timing, older ones time that one config once and keep it.

The genome of such a candidate is ``{"<kernel>@autotune.choice": {"by": size, "key": key choice (0: a grid size),
"keyed": the new key, "grid": the launcher's expression (a grid size only), "table": [[largest size or None, pin
choice of the configs knob], ...]}}``; the genetic search never mutates it.
"""
from __future__ import annotations

import ast
import math
import textwrap
from dataclasses import dataclass

from runners.syntax import literal, parse

from .autotune_key import BUCKET, bucket_value
from .kernel_sizes import CaseSize
from .launch_params import Autotuned, Knob, TuneConfig, render

CHOICE = "choice"


def choice_key(kernel: str) -> str:
    return f"{kernel}@autotune.{CHOICE}"


def is_choice_key(key: str) -> bool:
    return key.endswith(f"@autotune.{CHOICE}")


@dataclass(frozen=True)
class Size:
    """What picks the config: a scalar argument of the kernel that a re-keying adds (``key_choice`` of the key
    knob), or a size of the launcher that only the grid uses (``grid``: a new ``<size>_bucket`` argument)."""
    name: str
    key_choice: int = 0
    grid: ast.expr | None = None

    def keyed(self, key: list[str], knob: Knob | None) -> list[str]:
        return literal(knob.choices[self.key_choice]) if self.grid is None else [*key, self.name + BUCKET]

    @property
    def argument(self) -> str:
        """The argument the prune function reads: the size itself, or (a grid size) its bucket."""
        return self.name if self.grid is None else self.name + BUCKET


@dataclass(frozen=True)
class Plan:
    kernel: str
    size: Size
    keyed: tuple[str, ...]  # the new autotune key
    table: tuple[tuple[int | None, int], ...]  # (largest size, pin choice); None: every larger size
    buckets: tuple[tuple[int, int, tuple[str, ...]], ...]  # (measured bucket, pin choice, its cases)

    @property
    def genome(self) -> dict:
        grid = {"grid": ast.unparse(self.size.grid)} if self.size.grid is not None else {}
        return {choice_key(self.kernel): {"by": self.size.name, "key": self.size.key_choice, "keyed": list(self.keyed),
                                          **grid, "table": [list(row) for row in self.table]}}


def size_param(key: Knob) -> tuple[str, int] | None:
    """(the scalar, the key knob's choice) of the first re-keying on one more scalar: bucketed ones come first."""
    for index in range(1, len(key.choices)):
        added = literal(key.choices[index])[-1]
        return (added[: -len(BUCKET)] if added.endswith(BUCKET) else added), index
    return None


def _launch(tree: ast.Module, entry: str, tuned: Autotuned) -> tuple[ast.FunctionDef, ast.Call] | None:
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry), None)
    site = next((c for c in tuned.sites if fn is not None and fn.lineno <= c.lineno <= fn.end_lineno), None)
    return (fn, site) if site is not None else None


def grid_size(tree: ast.Module, entry: str, tuned: Autotuned) -> ast.Name | None:
    """The size a row-parallel kernel gets only through its grid: ``M`` in ``grid = lambda meta: (cdiv(N,
    meta["BLOCK_N"]), M)`` (Liger's DyT), a name of the launcher that does not depend on the config and is no
    argument of the kernel. None where the grid is not written that way or the kernel's signature is not plain."""
    found = _launch(tree, entry, tuned)
    if found is None or tuned.fn is None or tuned.key_node is None:
        return None
    fn, site = found
    params = {a.arg for a in tuned.fn.args.args}
    a = tuned.fn.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        return None
    grid = site.func.slice
    if isinstance(grid, ast.Name):
        bound = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                 and isinstance(n.targets[0], ast.Name) and n.targets[0].id == grid.id]
        defs = [n for n in ast.walk(fn) if isinstance(n, ast.FunctionDef) and n.name == grid.id]
        if len(bound) + len(defs) != 1:
            return None
        grid = bound[0].value if bound else next((r.value for r in ast.walk(defs[0]) if isinstance(r, ast.Return)),
                                                 None)
    meta: set[str] = set()
    if isinstance(grid, ast.Lambda):
        meta, grid = {x.arg for x in grid.args.args}, grid.body
    if not isinstance(grid, ast.Tuple):
        return None
    for dim in grid.elts:
        if isinstance(dim, ast.Name) and dim.id not in meta and dim.id not in params \
                and dim.id + BUCKET not in params:
            return dim
    return None


def _pins(configs: Knob, candidates) -> dict[int, dict[str, float]]:
    """{pin choice: {case: candidate µs}} of timed, correct candidates that changed only the configs to one pin."""
    pins: dict[int, dict[str, float]] = {}
    for cand in candidates:
        choice = cand.genome.get(configs.key, 0)
        ev = cand.evaluation
        if set(cand.genome) != {configs.key} or not configs.labels[choice].startswith("pin ") \
                or not (ev and ev.ok and ev.timed):
            continue
        times = {c.case: c.candidate_us for c in ev.cases if c.candidate_us}
        if times:
            pins[choice] = {**pins.get(choice, {}), **times}
    return pins


def _nearest(measured: list[tuple[int, int]]) -> tuple[tuple[int | None, int], ...]:
    """Rows (largest size, pin) from (bucket, pin) pairs sorted by bucket: between two measured buckets the
    boundary sits halfway (ties to the smaller); runs with the same pin merge; the last row covers the rest."""
    rows: list[tuple[int | None, int]] = []
    for (bucket, pin), nxt in zip(measured, measured[1:] + [None]):
        last = None if nxt is None else bucket + (nxt[0] - bucket) // 2
        limit = None if last is None else (1 << last) - 1
        if rows and rows[-1][1] == pin:
            rows[-1] = (limit, pin)
        else:
            rows.append((limit, pin))
    return tuple(rows)


def compose(tuned: Autotuned, configs: Knob, key: Knob | None, candidates, sizes: dict[str, CaseSize],
            size: Size) -> Plan | None:
    """The choice by ``size`` from the pins timed so far, or None: fewer than two pins, the decorator already
    prunes, or one pin fastest in every bucket."""
    if _decorator(tuned.fn) is None or any(k.arg == "prune_configs_by" for k in _decorator(tuned.fn).keywords):
        return None
    pins = _pins(configs, candidates)
    if len(pins) < 2:
        return None
    by_bucket: dict[int, list[str]] = {}
    for case in set.intersection(*(set(t) for t in pins.values())):
        if case in sizes and sizes[case].value > 0:
            by_bucket.setdefault(int(sizes[case].value).bit_length(), []).append(case)
    measured = []
    for bucket in sorted(by_bucket):
        cases = sorted(by_bucket[bucket])
        best = {c: min(t[c] for t in pins.values()) for c in cases}
        score = {p: sum(math.log(t[c] / best[c]) for c in cases) for p, t in pins.items()}
        measured.append((bucket, min(sorted(score), key=score.get), tuple(cases)))
    if len({pin for _, pin, _ in measured}) < 2:
        return None
    table = _nearest([(b, p) for b, p, _ in measured])
    return Plan(tuned.kernel, size, tuple(size.keyed(tuned.key, key)), table, tuple(measured))


def _decorator(fn: ast.FunctionDef | None) -> ast.Call | None:
    for dec in fn.decorator_list if fn is not None else []:
        if isinstance(dec, ast.Call) and getattr(dec.func, "attr", getattr(dec.func, "id", "")) == "autotune":
            return dec
    return None


def _config_dict(config: TuneConfig) -> str:
    items = [*config.kwargs, ("num_warps", config.num_warps), ("num_stages", config.num_stages)]
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in items if v is not None) + "}"


def pin_config(tuned: Autotuned, configs: Knob, pin: int) -> TuneConfig:
    return next(c for c in tuned.configs if f"pin {c.label}" == configs.labels[pin])


def _entry(tuned: Autotuned, configs: Knob, pin: int) -> str:
    """A row's config as the table writes it: its meta-parameters and warps and stages, or, for configs built at
    run time (pinned by position), its position in the list."""
    if tuned.runtime is not None:
        return configs.labels[pin].split("#", 1)[1].split()[0]
    return _config_dict(pin_config(tuned, configs, pin))


def _pick(tuned: Autotuned) -> str:
    """The prune function's last lines: the table's config found in the list (or every config, if it is not)."""
    if tuned.runtime is not None:
        return "    return configs[want:want + 1] or configs\n\n\n"
    return ("    picked = [c for c in configs\n"
            "              if all({**c.kwargs, 'num_warps': c.num_warps, 'num_stages': c.num_stages}.get(k) == v\n"
            "                     for k, v in want.items())]\n"
            "    return picked[:1] or configs\n\n\n")


def names(plan: Plan) -> tuple[str, str]:
    """The table's and the prune function's names in the module."""
    stem = f"{plan.kernel.lstrip('_')}_config_by_{plan.size.name}"
    return f"_{stem.upper()}", f"_{stem}"


def preamble(plan: Plan, tuned: Autotuned, configs: Knob, sizes: dict[str, CaseSize]) -> str:
    """The table and the prune function, with the comment a reviewer reads first."""
    table, fn = names(plan)
    size, arg = plan.size.name, plan.size.argument
    measured = "; ".join(
        f"{size}={'/'.join(str(v) for v in sorted({sizes[c].value for c in cases}))} ({', '.join(cases)}): "
        f"{configs.labels[pin][len('pin '):]}" for _, pin, cases in plan.buckets)
    how = next(sizes[c].how for _, _, cases in plan.buckets for c in cases)
    passed = (f" {size} reaches the kernel only through its grid: the launch passes "
              f"{arg}={bucket_value(size)}, its power of two." if plan.size.grid is not None else "")
    comment = (f"kernelsmith: the config of {plan.kernel} chosen by {size}, without benchmarking at run time. "
               f"Its autotune key {tuned.key} cannot tell small {size} from large, and no one config was "
               f"fastest at both. Each row is the config measured fastest at the cases of those sizes: {measured}. "
               f"A size between measured ones takes the nearest measured power of two. ({size} at the cases: "
               f"{how}.){passed}")
    rows = "\n".join(f"    ({limit!r}, {_entry(tuned, configs, pin)})," for limit, pin in plan.table)
    what = "position in the list built at run time" if tuned.runtime is not None else "config"
    # a bucket b holds the sizes 2**(b-1) .. 2**b - 1 and every limit is 2**k - 1: size <= limit exactly when
    # b <= limit.bit_length()
    var, test = ("size", "size <= limit") if plan.size.grid is None else ("bucket", "bucket <= limit.bit_length()")
    return (textwrap.fill(comment, 116, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False) + "\n"
            f"{table} = [  # ({size} up to, {what}); None: any larger {size}\n{rows}\n]\n\n\n"
            f"def {fn}(configs, named_args, **kwargs):\n"
            f"    \"\"\"The one config of {table} for this call's {arg} (every config, autotuned as\n"
            f"    before, if the table's config is not in the list).\"\"\"\n"
            f"    {var} = {{**named_args, **kwargs}}.get({arg!r})\n"
            f"    if {var} is None:\n"
            f"        return configs\n"
            f"    want = next(config for limit, config in {table} if limit is None or {test})\n"
            + _pick(tuned))


def _grid_edits(source: str, tuned: Autotuned, site: ast.Call, size: Size) -> str:
    """A grid size becomes an argument: ``<size>_bucket=0`` ends the kernel's signature, each launch passes
    ``<size>_bucket=int(<size>).bit_length()``, and the key names it."""
    data = source.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def at(lineno: int, col: int) -> int:
        return starts[lineno - 1] + col

    fn = tuned.fn
    end = (fn.args.defaults or fn.args.args)[-1]
    after = (site.args + site.keywords)[-1]
    arg = size.argument
    edits = [(at(end.end_lineno, end.end_col_offset), at(end.end_lineno, end.end_col_offset), f", {arg}=0"),
             (at(after.end_lineno, after.end_col_offset), at(after.end_lineno, after.end_col_offset),
              f", {arg}={bucket_value(size.name)}"),
             (at(tuned.key_node.lineno, tuned.key_node.col_offset),
              at(tuned.key_node.end_lineno, tuned.key_node.end_col_offset), repr([*tuned.key, arg]))]
    for start, stop, text in sorted(edits, reverse=True):
        data = data[:start] + text.encode() + data[stop:]
    return data.decode()


def render_choice(source: str, knobs: list[Knob], entry: str | None, plan: Plan, tuned: Autotuned,
                  sizes: dict[str, CaseSize]) -> str | None:
    """The candidate source: the key re-keyed on the size, the table and its prune function before the kernel's
    decorators, and ``prune_configs_by`` on its ``@triton.autotune`` (None: a name of the table is taken)."""
    key = next((k for k in knobs if k.kernel == plan.kernel and k.name == "key" and k.kind == "autotune"), None)
    configs = next(k for k in knobs if k.kernel == plan.kernel and k.name == "configs" and k.kind == "autotune")
    table, fn = names(plan)
    if table in source or fn in source:
        return None
    if plan.size.grid is None:
        keyed = render(source, knobs, {key.key: plan.size.key_choice}, entry)
    else:
        keyed = _grid_edits(source, tuned, _launch(parse(source), entry, tuned)[1], plan.size)
    tree = parse(keyed)
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == plan.kernel)
    dec = _decorator(kernel)
    lines = keyed.splitlines(keepends=True)
    last = (dec.args + dec.keywords)[-1]
    line = lines[last.end_lineno - 1].encode()
    indent = " " * (dec.args + dec.keywords)[0].col_offset  # under the decorator's first argument
    added = f",\n{indent}prune_configs_by={{'early_config_prune': {fn}}}"
    lines[last.end_lineno - 1] = (line[:last.end_col_offset] + added.encode() + line[last.end_col_offset:]).decode()
    first = min(d.lineno for d in kernel.decorator_list)
    lines.insert(first - 1, preamble(plan, tuned, configs, sizes))
    return "".join(lines)


def describe(value: dict, configs: Knob) -> str:
    """``config chosen by n_rows: n_rows <= 511: ROWS=1, num_warps=1; above: ROWS=8, num_warps=1 (key ...)``."""
    size = value["by"]
    parts = []
    for limit, pin in value["table"]:
        label = configs.labels[pin][len("pin "):]
        parts.append(f"{size} <= {limit}: {label}" if limit is not None else
                     (f"above: {label}" if parts else f"any {size}: {label}"))
    keyed = f" (key {value['keyed']})" if value.get("keyed") else ""
    return f"config chosen by {size}: {'; '.join(parts)}{keyed}"
