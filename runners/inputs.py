"""Inputs for one case, made by the harness from a seed the candidate never sees."""
from __future__ import annotations

import ast
import operator

import torch

from .task import ArgSpec, Case

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

    return ev(ast.parse(str(dim), mode="eval").body)


def case_shapes(args: list[ArgSpec], case: Case) -> dict[str, tuple[int, ...]]:
    return {a.name: tuple(eval_dim(d, case.symbols) for d in a.shape) for a in active_args(args, case) if a.is_tensor}


def active_args(args: list[ArgSpec], case: Case) -> list[ArgSpec]:
    return [a for a in args if a.when is None or case.symbols.get(a.when)]


def make_tensor(spec: ArgSpec, shape: tuple[int, ...], dtype: torch.dtype, device: str, gen: torch.Generator):
    if not dtype.is_floating_point:
        low, high = int(spec.low), int(spec.high)
        return torch.randint(low, high, shape, generator=gen, device=device, dtype=dtype)
    if spec.dist == "uniform":
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (spec.high - spec.low) + spec.low
    else:
        t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * spec.scale
    return t.to(dtype)


def make_inputs(args: list[ArgSpec], case: Case, device: str, seed: int) -> dict:
    """Keyword arguments for the entry function (all tensors fresh, drawn from ``seed``)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    shapes = case_shapes(args, case)
    kwargs = {}
    for spec in active_args(args, case):
        if spec.is_tensor:
            dtype = getattr(torch, spec.dtype or case.dtype)
            kwargs[spec.name] = make_tensor(spec, shapes[spec.name], dtype, device, gen)
        else:
            kwargs[spec.name] = spec.value
    return kwargs


def clone_inputs(kwargs: dict) -> dict:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
