"""Run-time check that a candidate left torch, Triton and the harness as it found them.

The static policy refuses the usual ways of monkey-patching; this catches what slips past it (a candidate
runs in the same process as the oracle, the comparison and the timer). Only callables are watched: libraries
legitimately change their data attributes (caches, flags) as they initialise.
"""
from __future__ import annotations

import builtins
from types import ModuleType

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction


_TENSOR_BASE = getattr(torch._C, "TensorBase", None) or getattr(torch._C, "_TensorBase")


def _watched(harness: list[ModuleType]) -> list[tuple[str, object]]:
    objects = [("builtins", builtins), ("torch", torch), ("torch.Tensor", torch.Tensor), ("TensorBase", _TENSOR_BASE),
               ("torch.cuda", torch.cuda), ("torch.cuda.Event", torch.cuda.Event),
               ("torch.cuda.CUDAGraph", torch.cuda.CUDAGraph), ("triton", triton), ("triton.language", tl),
               ("JITFunction", JITFunction)]
    return objects + [(m.__name__, m) for m in harness]


def snapshot(harness: list[ModuleType]) -> dict[str, int]:
    """Identity of every callable attribute of the watched modules and classes."""
    return {f"{name}.{key}": id(value) for name, obj in _watched(harness)
            for key, value in list(vars(obj).items())
            if callable(value) or isinstance(value, (staticmethod, classmethod, property))}


def tampered(before: dict[str, int], harness: list[ModuleType]) -> list[str]:
    """Names whose callable was replaced or removed since ``before``, and callables added to a watched class
    (a method set on ``torch.Tensor`` shadows the one it inherits). Modules may grow lazily; classes do not."""
    after = snapshot(harness)
    classes = tuple(f"{name}." for name, obj in _watched(harness) if isinstance(obj, type))
    changed = {name for name, ident in before.items() if after.get(name) != ident}
    changed |= {name for name in after.keys() - before.keys() if name.startswith(classes)}
    return sorted(changed)
