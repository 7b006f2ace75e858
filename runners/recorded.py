"""Recorded values of integer and bool tensors: what a captured call passed, replayed as it was.

Index tensors (token ids, ``cu_seqlens``, block tables, sorted expert ids) must hold values that agree with
the other arguments, so a captured case does not draw them from ``low``..``high``: it replays the values the
repository's test passed. One recorded tensor is a small dict (``Case.recorded[name]``)::

    {"dtype": "int32", "shape": [7], "sha256": "<hex of the raw bytes>", "data": "<base64 of the raw bytes>"}

The raw bytes are the tensor's elements in row-major order, little-endian; nothing is pickled. In
``task.yaml`` the ``data`` is replaced by ``file: recorded/<sha256>.bin``, a file of the bundle (one per
distinct tensor); ``read_task`` reads it back and checks its digest. A case dict carries ``data`` inline, so
the workers' slot banks (built from the case the judge sends) get the same values without reading files.
"""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

RECORDED_DIR = "recorded"
# Integer and bool dtypes whose values are replayed, with their element sizes.
ITEM_SIZES = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
              "uint64": 8}
# A case's recorded tensors travel inline in the judge's requests (a JSON message is at most 16 MiB), so one
# case replays at most this many raw bytes; larger tensors keep drawing from low..high.
CASE_MAX_BYTES = 6 << 20


class RecordedError(ValueError):
    pass


def entry(dtype: str, shape: list[int], raw: bytes) -> dict:
    """The dict for one recorded tensor, checked: a known dtype and exactly shape x item size bytes."""
    if dtype not in ITEM_SIZES:
        raise RecordedError(f"recorded dtype {dtype!r} is not an integer or bool dtype")
    shape = [int(d) for d in shape]
    numel = 1
    for d in shape:
        if d < 0:
            raise RecordedError(f"recorded shape {shape} has a negative size")
        numel *= d
    if len(raw) != numel * ITEM_SIZES[dtype]:
        raise RecordedError(f"recorded {dtype} {shape} needs {numel * ITEM_SIZES[dtype]} bytes, got {len(raw)}")
    return {"dtype": dtype, "shape": shape, "sha256": hashlib.sha256(raw).hexdigest(),
            "data": base64.b64encode(raw).decode("ascii")}


def nbytes(rec: dict) -> int:
    numel = 1
    for d in rec["shape"]:
        numel *= int(d)
    return numel * ITEM_SIZES[rec["dtype"]]


_DECODED: dict[tuple, object] = {}  # (sha256, dtype) -> CPU tensor; the same values decode once per process


def tensor(rec: dict, dtype, device: str):
    """A fresh tensor on ``device`` holding the recorded values, cast to ``dtype`` (a torch.dtype)."""
    import torch

    key = (rec["sha256"], rec["dtype"])
    cpu = _DECODED.get(key)
    if cpu is None:
        raw = base64.b64decode(rec["data"])
        if hashlib.sha256(raw).hexdigest() != rec["sha256"]:
            raise RecordedError(f"recorded values do not match their digest {rec['sha256'][:12]}")
        stored = getattr(torch, rec["dtype"])
        if raw:
            cpu = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(stored).reshape(rec["shape"])
        else:
            cpu = torch.empty(rec["shape"], dtype=stored)
        if len(_DECODED) > 64:
            _DECODED.clear()
        _DECODED[key] = cpu
    return cpu.to(device=device, dtype=dtype, copy=True)


def to_files(bundle: Path, cases: list[dict]) -> list[dict]:
    """Case dicts for task.yaml: each recorded tensor's bytes written to ``bundle/recorded/<sha256>.bin`` and
    its ``data`` replaced by that file's path (relative to the bundle)."""
    out = []
    for case in cases:
        recorded = {}
        for name, rec in (case.get("recorded") or {}).items():
            rel = f"{RECORDED_DIR}/{rec['sha256']}.bin"
            path = Path(bundle) / rel
            if not path.is_file():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(base64.b64decode(rec["data"]))
            recorded[name] = {**{k: v for k, v in rec.items() if k != "data"}, "file": rel}
        out.append({**case, "recorded": recorded} if recorded else case)
    return out


def from_files(bundle: Path, cases: list[dict]) -> list[dict]:
    """The inverse of ``to_files``: each ``file`` read back (and checked against its digest) into ``data``."""
    out = []
    for case in cases:
        recorded = {}
        for name, rec in (case.get("recorded") or {}).items():
            rel = rec.get("file", "")
            if not rel.startswith(f"{RECORDED_DIR}/") or ".." in Path(rel).parts:
                raise RecordedError(f"recorded values of `{name}` name {rel!r}, not a file under {RECORDED_DIR}/")
            try:
                raw = (Path(bundle) / rel).read_bytes()
            except OSError as exc:
                raise RecordedError(f"recorded values of `{name}` are missing from the bundle ({rel}): {exc}") from None
            checked = entry(rec["dtype"], rec["shape"], raw)
            if checked["sha256"] != rec["sha256"]:
                raise RecordedError(f"{rel} does not hold the recorded values of `{name}` (digest differs)")
            recorded[name] = checked
        out.append({**case, "recorded": recorded} if recorded else case)
    return out
