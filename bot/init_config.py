"""`kernelsmith init`: a proposed `.github/kernelsmith.yml`, from the scan and (optionally) a capture run.

One entry per entry function that a test reaches. Without ``--capture`` the arguments come from the entry's
signature (tensors get a guessed ``[T, H]`` shape, marked for review); with it, each kernel's test runs once
with the capture plugin and the recorded calls give the arguments' ranks, the shape symbols (sizes that move
together share one), the dtypes, scalar values, optional arguments and the arguments written in place.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from runners.extract import import_root
from runners.syntax import literal

from .scan import RepoIndex, ScanRow, scan

SYMBOLS = ("T", "H", "I", "N", "K", "D", "E", "M", "P", "Q", "R", "S")
FLOATS = ("float16", "bfloat16", "float32")


@dataclass
class Proposal:
    name: str
    path: str
    entry: str
    test: str
    args: dict = field(default_factory=dict)
    shapes: list[dict] = field(default_factory=list)
    smoke_shapes: list[dict] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=lambda: ["float16", "bfloat16"])
    written: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)  # what a maintainer must check


def _signature(index: RepoIndex, rel: str, entry: str) -> list[tuple[str, object, bool]]:
    """(name, default, has default) of the entry's parameters."""
    node = index.files[rel].defs[entry]
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = []
    for a, d in [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]:
        if a.arg in ("self", "cls", "ctx"):
            continue
        try:
            value, has = (literal(d), True) if d is not None else (None, False)
        except ValueError:
            value, has = None, True
        out.append((a.arg, value, has))
    return out


def from_signature(index: RepoIndex, row: ScanRow) -> Proposal:
    rel, entry = row.entry_file, row.entry_name
    prop = Proposal(entry.lstrip("_"), rel, entry, row.tests[0])
    for name, default, has_default in _signature(index, rel, entry):
        if has_default and (default is None or isinstance(default, (bool, int, float, str))):
            if default is not None:
                prop.args[name] = {"value": default}
            continue
        if name.endswith(("_shape", "_size", "_dims")) or name in ("shape", "size", "dims"):
            prop.args[name] = {"size": ["H"]}  # FlagGems' normalized_shape: sizes, not a tensor
            prop.review.append(f"`{name}` is taken for a list of sizes (`size: [H]`) by its name")
            continue
        if name == "dtype" or name.endswith("_dtype"):  # SGLang's triton_scaled_mm(..., out_dtype): a torch.dtype
            prop.args[name] = {"value": "torch.float16"}
            prop.review.append(f"`{name}` is taken for a torch.dtype (`value: torch.float16`) by its name")
            continue
        prop.args[name] = {"shape": ["T", "H"]}
    prop.shapes = [{"T": 1, "H": 4096}, {"T": 4096, "H": 4096}]
    prop.smoke_shapes = [{"T": 3, "H": 256}]
    prop.review.append("argument shapes and sizes are guesses from the signature: run `kernelsmith init --capture` "
                       "or write them from the kernel's real calls")
    return prop


def _symbolize(calls: list[dict], tensors: list[str]) -> tuple[dict[str, list], list[dict]]:
    """Shape entries per tensor argument and one symbol assignment per call: dimension positions whose sizes
    move together across calls share a symbol, multiples of another become ``2*I``, constants stay numbers."""
    positions: dict[tuple[str, int], tuple] = {}
    for name in tensors:
        ranks = {len(c["args"][name]["shape"]) for c in calls if c["args"][name].get("kind") == "tensor"}
        for d in range(max(ranks)):
            positions[(name, d)] = tuple(c["args"][name]["shape"][d] if c["args"][name].get("kind") == "tensor"
                                         else None for c in calls)
    names: dict[tuple, str] = {}
    shapes: dict[str, list] = {n: [] for n in tensors}
    for (arg, _), vector in positions.items():
        known = [v for v in vector if v is not None]
        if len(set(known)) == 1 and len(calls) > 1:
            shapes[arg].append(known[0])
            continue
        same = next((v for v in names if all(a is None or b is None or a == b for a, b in zip(vector, v))), None)
        if same is not None:
            shapes[arg].append(names[same])
            continue
        if vector not in names:
            base = next(((k, names[v]) for v in names for k in (2, 3, 4) if all(
                a is None or b is None or a == k * b for a, b in zip(vector, v))), None)
            if base:
                shapes[arg].append(f"{base[0]}*{base[1]}")
                continue
            names[vector] = SYMBOLS[len(names) % len(SYMBOLS)] + ("" if len(names) < len(SYMBOLS) else str(len(names)))
        shapes[arg].append(names[vector])
    assignments = []
    for i in range(len(calls)):
        assignments.append({sym: vector[i] for vector, sym in names.items() if vector[i] is not None})
    return shapes, assignments


def _usual_ranks(calls: list[dict]) -> list[dict]:
    """The calls in which every tensor argument has its most common rank."""
    ranks: dict[str, list[int]] = {}
    for c in calls:
        for n, v in c["args"].items():
            if v.get("kind") == "tensor":
                ranks.setdefault(n, []).append(len(v["shape"]))
    modal = {n: max(set(r), key=r.count) for n, r in ranks.items()}
    return [c for c in calls if all(len(v["shape"]) == modal[n] for n, v in c["args"].items()
                                    if v.get("kind") == "tensor")]


def _size_of(values: list, assignments: list[dict]):
    """``H`` or ``[H]`` when every call's int (or list of ints) equals the same symbols' sizes, else None."""
    def plain_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    as_lists = [v if isinstance(v, list) else [v] for v in values]
    if len({len(v) for v in as_lists}) != 1 or not all(plain_int(x) for v in as_lists for x in v):
        return None
    symbols = []
    for position in range(len(as_lists[0])):
        common = set.intersection(*({s for s, n in a.items() if plain_int(n) and n == v[position]}
                                    for v, a in zip(as_lists, assignments)))
        if not common:
            return None
        symbols.append(min(common, key=SYMBOLS.index if all(c in SYMBOLS for c in common) else str))
    return symbols if isinstance(values[0], list) else symbols[0]


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:
        return True


def _fixed_floats(calls: list[dict], tensors: list[str]) -> dict[str, str]:
    """float32 tensors that stay float32 while another floating tensor of the same calls is half (per-row scales
    beside float16 activations): their dtype is fixed, not the case's."""
    seen: dict[str, set] = {}
    for c in calls:
        for n in tensors:
            v = c["args"].get(n, {})
            if v.get("kind") == "tensor" and v["dtype"] in FLOATS:
                seen.setdefault(n, set()).add(v["dtype"])
    fixed = {}
    for n, dtypes in seen.items():
        (dtype,) = dtypes if len(dtypes) == 1 else (None,)
        if dtype == "float32" and any(c["args"].get(m, {}).get("dtype", dtype) != dtype
                                      for c in calls for m in seen if m != n):
            fixed[n] = dtype
    return fixed


def from_calls(row: ScanRow, calls: list[dict], limit: int = 4) -> Proposal | None:
    """``row`` comes from ``scan``, whose ``tests`` are sorted closest first."""
    calls = [c for c in calls if "args" in c]
    calls = _usual_ranks(calls)
    if not calls:
        return None
    prop = Proposal(row.entry_name.lstrip("_"), row.entry_file, row.entry_name, row.tests[0])
    names = list(calls[0]["args"])
    tensors, optional = [], []
    for name in names:
        kinds = {c["args"].get(name, {}).get("kind") for c in calls}
        if "tensor" in kinds:
            tensors.append(name)
            if kinds & {"none", None}:
                optional.append(name)
    ranks_ok = [n for n in tensors if len({len(c["args"][n]["shape"]) for c in calls
                                           if c["args"][n].get("kind") == "tensor"}) == 1]
    shapes, assignments = _symbolize(calls, ranks_ok)
    fixed = _fixed_floats(calls, ranks_ok)
    for name in names:
        values = [c["args"].get(name, {}) for c in calls]
        if name in ranks_ok:
            spec = {"shape": shapes[name]}
            kept = [v["dtype"] for v in values if v.get("kind") == "tensor"]
            dtypes = set(kept)
            if name in fixed:  # SGLang's scale_a/scale_b: float32 whatever the case's dtype
                spec["dtype"] = fixed[name]
            elif dtypes and not dtypes & set(FLOATS):
                spec["dtype"] = max(dict.fromkeys(kept), key=kept.count)
                spec.update(low=0, high=8)
                prop.review.append(f"`{name}` is {spec['dtype']}: check `low`/`high` against the values it must hold")
                if len(dtypes) > 1:  # int8 and float8 inputs of one matmul: one dtype per config entry
                    prop.review.append(f"`{name}` took {', '.join(sorted(dtypes))} in the tests: proposed "
                                       f"{spec['dtype']}; calls with another dtype are not replayed")
            if name in optional:
                spec["when"] = f"has_{name}"
            prop.args[name] = spec
        elif name in tensors:
            prop.review.append(f"`{name}` changes rank between calls: write its shape by hand")
        elif all(v.get("kind") == "dtype" for v in values):  # `out_dtype=torch.float16`: written `torch.float16`
            kept = [v["value"] for v in values]
            usual = max(dict.fromkeys(kept), key=kept.count)
            prop.args[name] = {"value": f"torch.{usual}"}
            if len(set(kept)) > 1:
                prop.review.append(f"`{name}` took {len(set(kept))} dtypes in the tests ({', '.join(sorted(set(kept)))}"
                                   f"): the configured shapes use torch.{usual}, captured cases replay the tests' own")
        elif all(v.get("kind") == "scalar" for v in values):
            seen = {repr(v["value"]) for v in values}
            first = values[0]["value"]
            size = _size_of([v["value"] for v in values], assignments) if len(seen) > 1 else None
            if size is not None:  # FlagGems' normalized_shape=[N]: sizes that follow the tensors' symbols
                prop.args[name] = {"size": size}
            elif len(seen) > 1 and all(isinstance(v["value"], float) for v in values):  # eps, a scale
                prop.args[name] = {"range": [min(v["value"] for v in values), max(v["value"] for v in values)]}
            elif len(seen) > 1 and all(isinstance(v["value"], int) and not isinstance(v["value"], bool)
                                       for v in values):
                # a mode, a flag or a length that must agree with the tensors (LMDeploy's quant_policy 0/4/8/42,
                # max_q_seq_length): a value drawn from a range would be none of them. The configured shapes use
                # the usual one; captured cases replay each call's own
                kept = [v["value"] for v in values]
                usual = max(dict.fromkeys(kept), key=kept.count)
                prop.args[name] = {"value": usual}
                prop.review.append(f"`{name}` took {len(seen)} integer values in the tests "
                                   f"({', '.join(sorted(seen, key=lambda x: float(x))[:6])}): the configured shapes "
                                   f"use {usual}, captured cases replay the tests' own; add shapes for the others")
            else:
                prop.args[name] = {"value": first}
    floats = sorted({v["dtype"] for c in calls for n in ranks_ok if n not in fixed for v in [c["args"][n]]
                     if v.get("kind") == "tensor" and v["dtype"] in FLOATS}, key=FLOATS.index)
    prop.dtypes = floats or ["float16"]
    flags = [f"has_{n}" for n in optional]
    distinct = []
    for call, symbols in zip(calls, assignments):
        for n in optional:
            symbols[f"has_{n}"] = call["args"][n].get("kind") == "tensor"
        if symbols not in distinct:
            distinct.append(symbols)
    distinct.sort(key=lambda s: sum(v for k, v in s.items() if k not in flags))
    prop.smoke_shapes = distinct[:2]
    prop.shapes = distinct[-limit:]
    prop.written = sorted({w for c in calls for w in (c.get("written") or []) if w in prop.args})
    prop.review.append(f"shapes are the ones the tests use ({len(calls)} calls); add the sizes that matter in "
                       "production (decode and prefill token counts)")
    return prop


def proposals(root: Path, capture=None, only: list[str] | None = None) -> list[Proposal]:
    """One proposal per entry that a test reaches (``only``: these entry names). ``capture(row, test, dotted)``
    returns the calls recorded while that test ran, and why there were none (or None)."""
    index = RepoIndex(root)
    out: dict[str, Proposal] = {}
    for row in scan(root, index=index):
        if not row.entry or not row.tests or row.entry in out or (only and row.entry_name not in only):
            continue
        prop, why = None, None
        if capture is not None:
            calls, why = capture(row, row.tests[0], import_root(Path(root), row.entry_file)[2])
            prop = from_calls(row, calls or [])
        if prop is None:
            prop = from_signature(index, row)
            if why:
                prop.review.insert(0, f"the capture run of {row.tests[0]} recorded no call of {row.entry_name}: {why}")
        out[row.entry] = prop
    names: set[str] = set()
    # the shallowest file keeps the plain name (not a vendor's copy); the others say where they live
    for prop in sorted(out.values(), key=lambda p: (len(Path(p.path).parts), p.path)):
        path = Path(prop.path)
        options = [prop.name, f"{path.stem}_{prop.name}", f"{path.parent.name.lstrip('_')}_{path.stem}_{prop.name}"]
        prop.name = next((n for n in options if n not in names), None) or next(
            f"{options[-1]}_{i}" for i in range(2, len(out) + 2) if f"{options[-1]}_{i}" not in names)
        names.add(prop.name)
    return list(out.values())


def render(props: list[Proposal], python: str | None = None) -> str:
    """The proposal as YAML; ``python`` (the interpreter the capture ran in, as the user gave it) goes in too."""
    kernels = {}
    for p in props:
        entry = {"path": p.path, "entry": p.entry, "test": p.test, "dtypes": p.dtypes}
        if p.written:
            entry["written"] = p.written
        entry.update(args=p.args, shapes=p.shapes, smoke_shapes=p.smoke_shapes)
        kernels[p.name] = entry
    head = ["# Proposed by `kernelsmith init`: review every entry before committing it.",
            "# docs/config.md in kernelsmith describes each key."]
    for p in props:
        head += [f"# {p.name}: REVIEW {r}" for r in p.review]
    top = {"version": 1, **({"python": python} if python else {}), "kernels": kernels}
    body = yaml.dump(top, Dumper=_NoAliases, sort_keys=False,
                     default_flow_style=None, width=110)
    return "\n".join(head) + "\n" + body
