"""Launch parameters of a kernel module: where Triton kernels are launched and which knobs are free to move.

A launch site is ``kernel[grid](..., BLOCK_M=4, num_warps=4)`` where ``kernel`` is a ``@triton.jit`` function
of the module, inside a function the entry reaches. Knobs of a plain launch are ``num_warps`` and
``num_stages`` (added when absent) and tile-size ``tl.constexpr`` keywords written as power-of-two literals.
Computed constexprs (``BLOCK_N=next_power_of_2(n)``) are left alone: correctness usually depends on them.

An ``@triton.autotune`` kernel pins nothing at its launch (its configs decide); its knobs sit on the decorator:
``configs`` (the original list, one config pinned, the configs that share one value, or the list widened by
more warps and stages; a list built at run time is pinned by position) and ``key`` (the original key, or the
key with one more scalar argument, bucketed to its power of two or exact, so that shapes the key could not tell
apart get their own choice: evolver/autotune_key.py). Edits are
spliced into the original text by byte offset, so a champion's diff touches only what changed.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from runners.policy import decorator_names
from runners.syntax import literal, parse

from .autotune_key import key_choices, key_edits

WARPS = ("1", "2", "4", "8", "16", "32")
NUM_STAGES = ("1", "2", "3", "4")
MAX_PINS = 24  # at most this many single-config choices per autotuned kernel
RUNTIME_PINS = 8  # configs built at run time (`get_tuned_config("mv")`): pin each of the first this many


@dataclass(frozen=True)
class Knob:
    site: int  # index of the launch site (kind "launch") or of the autotuned kernel (kind "autotune")
    line: int
    kernel: str
    name: str
    choices: tuple[str | None, ...]  # choice 0 is the original text (None: keyword absent)
    kind: str = "launch"  # launch | autotune
    labels: tuple[str, ...] = ()  # readable names of the choices (autotune knobs)

    @property
    def key(self) -> str:
        if self.kind == "autotune":
            return f"{self.kernel}@autotune.{self.name}"
        return f"{self.kernel}#{self.site}.{self.name}"

    def label(self, choice: int) -> str:
        if self.labels:
            return self.labels[choice]
        text = self.choices[choice]
        return text if text is not None else "(default)"


def jit_kernels(tree: ast.Module) -> dict[str, bool]:
    """Names of ``@triton.jit`` functions, mapped to whether they are also autotuned."""
    kernels = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            decs = decorator_names(node)
            if "jit" in decs:
                kernels[node.name] = "autotune" in decs
    return kernels


def reachable(tree: ast.Module, entry: str | None) -> set[str] | None:
    """Top-level functions and classes the entry reaches by name (None: no entry given, all count)."""
    if entry is None:
        return None
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    seen, todo = set(), [entry]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        todo += [n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name) and n.id in defs]
    return seen


def launch_sites(tree: ast.Module, entry: str | None = None, autotuned: bool = False) -> list[tuple[str, ast.Call]]:
    """``kernel[grid](...)`` calls in functions the entry reaches; plain kernels, or autotuned ones."""
    kernels = jit_kernels(tree)
    keep = reachable(tree, entry)
    sites = []
    for top in tree.body:
        if keep is not None and getattr(top, "name", None) not in keep:
            continue
        for node in ast.walk(top):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in kernels
                    and kernels[node.func.value.id] == autotuned):
                sites.append((node.func.value.id, node))
    return sorted(sites, key=lambda s: (s[1].lineno, s[1].col_offset))


def _pow2_literal(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0 \
            and node.value & (node.value - 1) == 0:
        return node.value
    return None


def _tile_choices(value: int) -> tuple[str, ...]:
    lo, hi = max(1, value // 8), min(1 << 16, value * 8)
    out, v = [], lo
    while v <= hi:
        out.append(str(v))
        v *= 2
    return tuple(out)


# ---- autotune: read the decorator's configs (literal lists and simple comprehensions) ----------------------

@dataclass(frozen=True)
class TuneConfig:
    kwargs: tuple[tuple[str, object], ...]  # the meta-parameters
    num_warps: int | None
    num_stages: int | None

    def text(self, config_call: str) -> str:
        meta = ", ".join(f"{k!r}: {v!r}" for k, v in self.kwargs)
        extra = "".join(f", {n}={v}" for n, v in (("num_warps", self.num_warps), ("num_stages", self.num_stages))
                        if v is not None)
        return f"{config_call}({{{meta}}}{extra})"

    @property
    def label(self) -> str:
        parts = [f"{k}={v}" for k, v in self.kwargs]
        parts += [f"{n}={v}" for n, v in (("num_warps", self.num_warps), ("num_stages", self.num_stages)) if v]
        return ", ".join(parts)


class _NotStatic(Exception):
    pass


_MODULE = " module"  # env key: the module's simple top-level assignments (name -> value node)


def _static(node: ast.expr, env: dict):
    """A config list's value without running target code: constants, lists, comprehensions, Config calls."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        module = env.get(_MODULE, {})
        if node.id in module:
            return _static(module[node.id], {_MODULE: {k: v for k, v in module.items() if k != node.id}})
        raise _NotStatic(node.id)
    if isinstance(node, ast.IfExp):  # `ALL if torch.cuda.is_available() else ALL[:1]`: the fuller branch
        branches = []
        for branch in (node.body, node.orelse):
            try:
                branches.append(_static(branch, env))
            except _NotStatic:
                pass
        if not branches:
            raise _NotStatic("IfExp")
        return max(branches, key=lambda b: len(b) if isinstance(b, list) else 0)
    if isinstance(node, ast.Subscript):
        value = _static(node.value, env)
        index = node.slice
        if isinstance(index, ast.Slice):
            parts = [_static(p, env) if p is not None else None for p in (index.lower, index.upper, index.step)]
            return value[slice(*parts)]
        return value[_static(index, env)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_static(node.operand, env)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_static(e, env) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_static(k, env): _static(v, env) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "Config":
        meta = _static(node.args[0], env) if node.args else {}
        kw = {k.arg: _static(k.value, env) for k in node.keywords if k.arg}
        if not isinstance(meta, dict) or set(kw) - {"num_warps", "num_stages", "num_ctas", "maxnreg"}:
            raise _NotStatic("Config")
        return TuneConfig(tuple(meta.items()), kw.get("num_warps"), kw.get("num_stages"))
    if isinstance(node, ast.ListComp):
        out: list = []

        def loop(i: int, scope: dict) -> None:
            if i == len(node.generators):
                out.append(_static(node.elt, scope))
                return
            gen = node.generators[i]
            if not isinstance(gen.target, ast.Name):
                raise _NotStatic("target")
            for value in _static(gen.iter, scope):
                inner = {**scope, gen.target.id: value}
                if all(_static(cond, inner) for cond in gen.ifs):
                    loop(i + 1, inner)

        loop(0, env)
        return out
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = _static(node.left, env), _static(node.comparators[0], env)
        table = {ast.Lt: lambda: a < b, ast.LtE: lambda: a <= b, ast.Gt: lambda: a > b, ast.GtE: lambda: a >= b,
                 ast.Eq: lambda: a == b, ast.NotEq: lambda: a != b}
        if type(node.ops[0]) in table:
            return table[type(node.ops[0])]()
    raise _NotStatic(type(node).__name__)


@dataclass
class Autotuned:
    kernel: str
    line: int
    configs_node: ast.expr
    key_node: ast.expr | None
    configs: list[TuneConfig]
    key: list[str]
    scalars: list[str]  # kernel parameters that look like scalars (never a load/store address)
    config_call: str  # how the module spells triton.Config
    runtime: str | None = None  # the configs expression, when it cannot be read without running the module
    fn: ast.FunctionDef | None = None  # the kernel's definition
    sites: list = field(default_factory=list)  # its launch calls the entry reaches


def _scalar_params(fn: ast.FunctionDef, constexprs: set[str]) -> list[str]:
    """Run-time scalar parameters: not an address, not a tuned meta-parameter, not a ``tl.constexpr``
    (those follow other arguments, like ``BLOCK_N = next_power_of_2(N)``)."""
    params = [a.arg for a in fn.args.args if not (a.annotation is not None and "constexpr" in ast.dump(a.annotation))]
    pointers = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("load", "store", "atomic_add") \
                and node.args:
            pointers |= {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            pointers.add(node.target.id)
    skip = ("eps", "stride", "scale", "alpha", "beta", "ptr")  # floats and layouts: no reason to re-tune on them
    return [p for p in params if p not in pointers and p not in constexprs and not any(w in p.lower() for w in skip)]


def autotuned_kernels(tree: ast.Module, source: str, entry: str | None = None) -> list[Autotuned]:
    """Autotuned kernels launched from code the entry reaches, with configs that read statically."""
    calls = launch_sites(tree, entry, autotuned=True)
    launched = {name for name, _ in calls}
    out = []
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name in launched):
            continue
        for dec in node.decorator_list:
            if not (isinstance(dec, ast.Call) and getattr(dec.func, "attr", getattr(dec.func, "id", "")) == "autotune"):
                continue
            kw = {k.arg: k.value for k in dec.keywords if k.arg}
            configs_node = kw.get("configs", dec.args[0] if dec.args else None)
            key_node = kw.get("key", dec.args[1] if len(dec.args) > 1 else None)
            env = {_MODULE: {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                             for t in n.targets if isinstance(t, ast.Name)}}
            errors = (_NotStatic, TypeError, IndexError, KeyError, ValueError, RecursionError, AttributeError)
            try:
                key = _static(key_node, env) if key_node is not None else []
            except errors:
                key, key_node = [], None  # a key built at run time: not re-keyed
            if not isinstance(key, list) or not all(isinstance(k, str) for k in key):
                key, key_node = [], None
            try:
                configs = _static(configs_node, env) if configs_node is not None else []
            except errors:
                configs = None  # built at run time (a YAML file, a function, pre_hook=): pinned by position
            if configs_node is None or (configs is not None and (
                    not configs or not all(isinstance(c, TuneConfig) for c in configs))):
                continue
            call = next((n for n in ast.walk(configs_node) if isinstance(n, ast.Call)), None)
            config_call = ast.get_source_segment(source, call.func) if call is not None else "triton.Config"
            tuned = {k for c in configs or [] for k, _ in c.kwargs}
            out.append(Autotuned(node.name, node.lineno, configs_node, key_node, configs or [], list(key),
                                 _scalar_params(node, tuned), config_call,
                                 ast.get_source_segment(source, configs_node) if configs is None else None,
                                 node, [c for name, c in calls if name == node.name]))
    return out


def _runtime_knob(tuned: Autotuned, index: int) -> Knob:
    """Configs the module builds when it runs: each of the first RUNTIME_PINS pinned by position (a list with
    fewer configs keeps all of them)."""
    short = " ".join(tuned.runtime.split())
    short = short if len(short) <= 48 else short[:45] + "..."
    texts: list[str | None] = [None]
    labels = ["(as written)"]
    for i in range(RUNTIME_PINS):
        texts.append(f"(lambda configs: configs[{i}:{i + 1}] or configs)({tuned.runtime})")
        labels.append(f"pin config #{i} of `{short}`")
    return Knob(index, tuned.line, tuned.kernel, "configs", tuple(texts), "autotune", tuple(labels))


def _config_list(configs: list[TuneConfig], call: str) -> str:
    return "[" + ", ".join(c.text(call) for c in configs) + "]"


def _widened(configs: list[TuneConfig]) -> list[TuneConfig]:
    extra = []
    for c in configs:
        for warps in {(c.num_warps or 4) * 2, max(1, (c.num_warps or 4) // 2)}:
            for stages in {c.num_stages or 2, (c.num_stages or 2) + 1}:
                new = TuneConfig(c.kwargs, min(warps, 32), stages)
                if new not in configs and new not in extra:
                    extra.append(new)
    return configs + extra[: max(4, len(configs))]


def autotune_knobs(tuned: Autotuned, index: int) -> list[Knob]:
    if tuned.runtime is not None:
        return [_runtime_knob(tuned, index), *_key_knobs(tuned, index)]
    orig_configs = "(as written)"
    call = tuned.config_call
    texts: list[str | None] = [None]
    labels = [orig_configs]
    step = max(1, len(tuned.configs) // MAX_PINS + (len(tuned.configs) % MAX_PINS > 0))
    for c in tuned.configs[::step]:
        texts.append(_config_list([c], call))
        labels.append(f"pin {c.label}")
    groups: dict[str, list[TuneConfig]] = {}
    for c in tuned.configs:
        for k, v in [*c.kwargs, ("num_warps", c.num_warps), ("num_stages", c.num_stages)]:
            groups.setdefault(f"{k}={v}", []).append(c)
    for label, members in groups.items():
        if 1 < len(members) < len(tuned.configs):
            texts.append(_config_list(members, call))
            labels.append(f"only configs with {label}")
    texts.append(_config_list(_widened(tuned.configs), call))
    labels.append("more configs (warps x2 and /2, one more stage)")
    return [Knob(index, tuned.line, tuned.kernel, "configs", tuple(texts), "autotune", tuple(labels)),
            *_key_knobs(tuned, index)]


def _key_knobs(tuned: Autotuned, index: int) -> list[Knob]:
    if tuned.key_node is None:
        return []
    choices = key_choices(tuned.key, tuned.scalars, tuned.fn, tuned.sites)  # bucketed first (evolver/autotune_key)
    if not choices:
        return []
    return [Knob(index, tuned.line, tuned.kernel, "key", (None, *[t for t, _ in choices]), "autotune",
                 (f"{tuned.key}", *[label for _, label in choices]))]


def find_knobs(source: str, entry: str | None = None) -> list[Knob]:
    """Every knob of the launches the entry reaches (all launches when ``entry`` is None)."""
    tree = parse(source)
    knobs: list[Knob] = []
    for site, (kernel, call) in enumerate(launch_sites(tree, entry)):
        given = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        for name, options in (("num_warps", WARPS), ("num_stages", NUM_STAGES)):
            original = ast.get_source_segment(source, given[name]) if name in given else None
            knobs.append(Knob(site, call.lineno, kernel, name,
                              (original, *[o for o in options if o != original])))
        for name, value in given.items():
            literal = _pow2_literal(value)
            if name.isupper() and literal is not None:
                orig = str(literal)
                knobs.append(Knob(site, call.lineno, kernel, name,
                                  (orig, *[c for c in _tile_choices(literal) if c != orig])))
    for index, tuned in enumerate(autotuned_kernels(tree, source, entry)):
        knobs += autotune_knobs(tuned, index)
    return knobs


def render(source: str, knobs: list[Knob], genome: dict[str, int], entry: str | None = None) -> str:
    """The source with each knob set to ``knob.choices[genome[knob.key]]`` (missing keys keep the original).

    ``entry`` must be the one the knobs were found with (it decides which launch sites are counted)."""
    tree = parse(source)
    sites = launch_sites(tree, entry)
    tuned = autotuned_kernels(tree, source, entry) if any(k.kind == "autotune" for k in knobs) else []
    data = source.encode()  # ast offsets are UTF-8 byte offsets
    line_starts = [0]
    for line in data.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:
        return line_starts[lineno - 1] + col

    def span(node: ast.AST) -> tuple[int, int]:
        return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)

    edits: list[tuple[int, int, bytes]] = []
    for knob in knobs:
        choice = genome.get(knob.key, 0)
        if choice == 0:
            continue
        value = knob.choices[choice]
        if knob.kind == "autotune":
            node = tuned[knob.site].configs_node if knob.name == "configs" else tuned[knob.site].key_node
            edits.append((*span(node), value.encode()))
            if knob.name == "key":  # a bucketed key adds an argument to the kernel and its launches
                edits += [(offset(a, b), offset(c, d), text.encode())
                          for a, b, c, d, text in key_edits(source, tuned[knob.site].fn, tuned[knob.site].sites,
                                                            literal(value))]
            continue
        call = sites[knob.site][1]
        existing = next((kw for kw in call.keywords if kw.arg == knob.name), None)
        if existing is not None:
            edits.append((*span(existing.value), value.encode()))
        else:
            last = (call.args + call.keywords)[-1] if (call.args or call.keywords) else None
            if last is not None:
                pos = offset(last.end_lineno, last.end_col_offset)
                edits.append((pos, pos, f", {knob.name}={value}".encode()))
            else:
                pos = offset(call.end_lineno, call.end_col_offset) - 1
                edits.append((pos, pos, f"{knob.name}={value}".encode()))
    for start, end, text in sorted(edits, key=lambda e: e[0], reverse=True):
        data = data[:start] + text + data[end:]
    return data.decode()
