"""Backends: one place per device family for its facts, its worker environment and whether it is timed.

``triton`` (Triton on NVIDIA CUDA), ``maca`` (Triton on MetaX MACA) and ``interpret`` (Triton's CPU
interpreter: correctness only) sit behind one seam, ``Backend``; the judge and the workers never test a
backend's name.
"""
from __future__ import annotations

from .base import Backend
from .cuda import CUDA
from .interpret import INTERPRET
from .maca import MACA

BACKENDS: dict[str, Backend] = {b.name: b for b in (CUDA, MACA, INTERPRET)}
ALIASES = {"nvidia": "triton", "cuda": "triton", "metax": "maca", "cpu": "interpret"}


def get_backend(name: str) -> Backend:
    key = ALIASES.get(name, name)
    if key not in BACKENDS:
        raise KeyError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
    return BACKENDS[key]


__all__ = ["BACKENDS", "Backend", "get_backend"]
