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


def value_sets(case) -> list[dict]:
    """A case's recorded value sets: the call it was made from, then the other calls recorded at it."""
    rec = getattr(case, "recorded", None) or {}
    return [rec, *[v for v in (getattr(case, "variants", None) or []) if set(v) == set(rec)]] if rec else []


MAX_VARIANTS = 3  # other calls kept per captured case, beside the one it was made from


def add_variant(case, recorded: dict) -> bool:
    """Keep another call's recorded values at ``case``: the same arguments in the same shapes, other values; at
    most MAX_VARIANTS, and CASE_MAX_BYTES for all of a case's sets together. Returns whether it was kept."""
    base = case.recorded or {}
    if not base or set(recorded) != set(base) or len(case.variants) >= MAX_VARIANTS:
        return False
    if any(list(rec["shape"]) != list(base[name]["shape"]) for name, rec in recorded.items()):
        return False
    sets = value_sets(case)
    digests = {tuple(sorted((n, r["sha256"]) for n, r in s.items())) for s in sets}
    if tuple(sorted((n, r["sha256"]) for n, r in recorded.items())) in digests:
        return False
    if sum(nbytes(r) for s in [*sets, recorded] for r in s.values()) > CASE_MAX_BYTES:
        return False
    case.variants.append(recorded)
    return True


def _set_to_files(bundle: Path, recorded: dict) -> dict:
    out = {}
    for name, rec in recorded.items():
        rel = f"{RECORDED_DIR}/{rec['sha256']}.bin"
        path = Path(bundle) / rel
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(rec["data"]))
        out[name] = {**{k: v for k, v in rec.items() if k != "data"}, "file": rel}
    return out


def _set_from_files(bundle: Path, recorded: dict) -> dict:
    out = {}
    for name, rec in recorded.items():
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
        out[name] = checked
    return out


def _convert(cases: list[dict], one) -> list[dict]:
    out = []
    for case in cases:
        recorded = one(case.get("recorded") or {})
        variants = [one(v) for v in case.get("variants") or []]
        if recorded:
            case = {**case, "recorded": recorded}
        if variants:
            case = {**case, "variants": variants}
        out.append(case)
    return out


def to_files(bundle: Path, cases: list[dict]) -> list[dict]:
    """Case dicts for task.yaml: each recorded tensor's bytes (of the case's call and of its variants) written to
    ``bundle/recorded/<sha256>.bin`` and its ``data`` replaced by that file's path (relative to the bundle)."""
    return _convert(cases, lambda recorded: _set_to_files(bundle, recorded))


def from_files(bundle: Path, cases: list[dict]) -> list[dict]:
    """The inverse of ``to_files``: each ``file`` read back (and checked against its digest) into ``data``."""
    return _convert(cases, lambda recorded: _set_from_files(bundle, recorded))
