"""Kernel descriptors for the MAP-Elites grid: what kind of kernel a candidate is, read from its code and its
evaluation. Two candidates in the same cell are alternatives of one design; different cells are different
designs worth keeping even when slower (block size, warps, stages, persistent or not, bytes moved).
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from runners.syntax import parse

from .candidate import Candidate


@dataclass(frozen=True)
class Descriptor:
    block: int  # log2 bucket of the largest power-of-two tile literal (0 when none)
    warps: int  # largest num_warps literal (0 when not given)
    stages: int  # largest num_stages literal (0 when not given)
    persistent: bool  # a grid-stride loop over tl.num_programs
    bytes_bucket: int  # bytes moved relative to the baseline: -1 fewer, 0 same, 1 more, None-> 0

    @property
    def key(self) -> tuple:
        return (self.block, self.warps, self.stages, self.persistent, self.bytes_bucket)


def _int(node: ast.expr) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def code_features(source: str) -> dict:
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return {"block": 0, "warps": 0, "stages": 0, "persistent": False}
    block = warps = stages = 0
    persistent = False
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.keyword) and node.arg:
            pairs.append((node.arg, node.value))
        elif isinstance(node, ast.Assign):
            pairs += [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
        for name, value in pairs:
            v = _int(value)
            if v is None or v <= 0:
                continue
            if name == "num_warps":
                warps = max(warps, v)
            elif name == "num_stages":
                stages = max(stages, v)
            elif name.isupper() and "BLOCK" in name and v & (v - 1) == 0:
                block = max(block, v)
        if isinstance(node, ast.Attribute) and node.attr == "num_programs":
            persistent = True
    return {"block": int(math.log2(block)) if block else 0, "warps": warps, "stages": stages,
            "persistent": persistent}


def bytes_moved(candidate: Candidate) -> int | None:
    ev = candidate.evaluation
    if not ev or not ev.cases or any(c.bytes_moved is None for c in ev.cases):
        return None
    return sum(c.bytes_moved for c in ev.cases)


def describe(candidate: Candidate, baseline_bytes: int | None) -> Descriptor:
    f = code_features(candidate.source)
    moved = bytes_moved(candidate)
    bucket = 0
    if moved is not None and baseline_bytes:
        ratio = moved / baseline_bytes
        bucket = -1 if ratio < 0.9 else (1 if ratio > 1.1 else 0)
    return Descriptor(f["block"], f["warps"], f["stages"], f["persistent"], bucket)
