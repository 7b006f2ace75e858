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


# Trial 0 draws the inputs as configured. Later trials scale every varying float tensor by a factor drawn
# across orders of magnitude, and give it a near-zero row and a row of large dynamic range: a kernel that is
# right only for unit-variance inputs (fp16 accumulation, a fixed eps, a polynomial approximation) fails.
SCALE_LOG10 = (-3.0, 1.5)  # upper end kept where fp16 outputs of the example ops cannot overflow
NEAR_ZERO = 1e-4
DYNAMIC_LOG10 = (-2.0, 1.5)


def make_tensor(spec: ArgSpec, shape: tuple[int, ...], dtype: torch.dtype, device: str, gen: torch.Generator,
                trial: int = 0):
    if not dtype.is_floating_point:
        low, high = int(spec.low), int(spec.high)
        return torch.randint(low, high, shape, generator=gen, device=device, dtype=dtype)
    if spec.dist == "uniform":
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (spec.high - spec.low) + spec.low
        return t.to(dtype)
    t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * spec.scale
    if trial > 0 and spec.vary and t.numel():
        lo, hi = SCALE_LOG10
        u = float(torch.rand((), generator=gen, device=device))
        t = t * 10 ** (lo + (hi - lo) * u)
        if t.dim() >= 2 and t.shape[0] >= 2:
            rows = t.reshape(t.shape[0], -1)
            rows[0] *= NEAR_ZERO
            lo, hi = DYNAMIC_LOG10
            rows[-1] *= 10 ** (lo + (hi - lo) * torch.rand(rows.shape[1], generator=gen, device=device))
    return t.to(dtype)


def scalar_value(spec: ArgSpec, gen: torch.Generator, device: str, trial: int):
    """A scalar argument: its fixed ``value``, or for a ``range`` one draw per trial (its low end on trial 0)."""
    if spec.range is None:
        return spec.value
    low, high = spec.range
    if trial == 0:
        return low
    u = float(torch.rand((), generator=gen, device=device))
    if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool):
        return min(high, low + int(u * (high - low + 1)))
    return low + (high - low) * u


def make_inputs(args: list[ArgSpec], case: Case, device: str, seed: int, trial: int = 0) -> dict:
    """Keyword arguments for the entry function (all tensors fresh, drawn from ``seed``)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    shapes = case_shapes(args, case)
    kwargs = {}
    for spec in active_args(args, case):
        if spec.is_tensor:
            dtype = getattr(torch, spec.dtype or case.dtype)
            kwargs[spec.name] = make_tensor(spec, shapes[spec.name], dtype, device, gen, trial)
        else:
            kwargs[spec.name] = scalar_value(spec, gen, device, trial)
    return kwargs


def clone_inputs(kwargs: dict) -> dict:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
