"""Launch parameters of a kernel module: where Triton kernels are launched and which knobs are free to move.

A launch site is ``kernel[grid](..., BLOCK_M=4, num_warps=4)`` where ``kernel`` is a ``@triton.jit`` function
of the module. Knobs are ``num_warps`` and ``num_stages`` (added when absent) and tile-size ``tl.constexpr``
keywords written as power-of-two literals. Computed constexprs (``BLOCK_N=next_power_of_2(n)``) are left
alone: correctness usually depends on them. Edits are spliced into the original text, so a champion's diff
touches only the numbers that changed.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

WARPS = ("1", "2", "4", "8", "16", "32")
NUM_STAGES = ("1", "2", "3", "4")


@dataclass(frozen=True)
class Knob:
    site: int  # index of the launch site in source order
    line: int
    kernel: str
    name: str
    choices: tuple[str | None, ...]  # choice 0 is the original text (None: keyword absent)

    @property
    def key(self) -> str:
        return f"{self.kernel}#{self.site}.{self.name}"


def _decorator_names(fn: ast.FunctionDef) -> set[str]:
    names = set()
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


def jit_kernels(tree: ast.Module) -> dict[str, bool]:
    """Names of ``@triton.jit`` functions, mapped to whether they are also autotuned."""
    kernels = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            decs = _decorator_names(node)
            if "jit" in decs:
                kernels[node.name] = "autotune" in decs
    return kernels


def launch_sites(tree: ast.Module) -> list[tuple[str, ast.Call]]:
    kernels = jit_kernels(tree)
    sites = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in kernels
                and not kernels[node.func.value.id]):  # autotuned launches must not pin their own configs
            sites.append((node.func.value.id, node))
    return sorted(sites, key=lambda s: (s[1].lineno, s[1].col_offset))


def _pow2_literal(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0:
        if node.value & (node.value - 1) == 0:
            return node.value
    return None


def _tile_choices(value: int) -> tuple[str, ...]:
    lo, hi = max(1, value // 8), min(1 << 16, value * 8)
    out, v = [], lo
    while v <= hi:
        out.append(str(v))
        v *= 2
    return tuple(out)


def find_knobs(source: str) -> list[Knob]:
    tree = ast.parse(source)
    knobs: list[Knob] = []
    for site, (kernel, call) in enumerate(launch_sites(tree)):
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
    return knobs


def render(source: str, knobs: list[Knob], genome: dict[str, int]) -> str:
    """The source with each knob set to ``knob.choices[genome[knob.key]]`` (missing keys keep the original)."""
    tree = ast.parse(source)
    sites = launch_sites(tree)
    data = source.encode()  # ast offsets are UTF-8 byte offsets
    line_starts = [0]
    for line in data.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:
        return line_starts[lineno - 1] + col

    edits: list[tuple[int, int, bytes]] = []
    for knob in knobs:
        choice = genome.get(knob.key, 0)
        if choice == 0:
            continue
        value = knob.choices[choice]
        call = sites[knob.site][1]
        existing = next((kw for kw in call.keywords if kw.arg == knob.name), None)
        if existing is not None:
            v = existing.value
            edits.append((offset(v.lineno, v.col_offset), offset(v.end_lineno, v.end_col_offset), value.encode()))
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
