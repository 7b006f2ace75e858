"""Attacks on the judge, fourth round: what the judge checks against what a caller does (layouts, the integer values
of captured cases) and how its timed passes call the entry (runners/inputs.py SlotBank, runners/timing.py).

As in tests/test_judge_attacks.py: every cheat runs past the static policy (the judge must hold on its own), under
the full protocol (``protocol="verify"``) and the search's (``protocol="search"``); attacks the judge lets through
today are ``xfail(strict=True)`` with the mechanism and the fix in the reason, and pass once it is fixed. Where a
cheat is "wrong", a plain test beside it shows it, outside the judge, on an input a caller passes. Timing attacks
run against a judge of their own in a subprocess, on the timed CPU stand-in of tests/test_judge_attacks.py
(``_SHIM``: host clock instead of CUDA events, direct calls instead of graph replay; every judge step is the real
one); their GPU form is at the end (run on the H200, predictions in the reasons).
"""
from __future__ import annotations

import base64
import importlib
import json
import shutil
import subprocess
import sys
import uuid

import pytest
import torch
import yaml
from conftest import CHEATS, ROOT
from test_judge_attacks import _SHIM


def _source(name: str, **marks: str) -> str:
    text = (CHEATS / name).read_text()
    for key, value in marks.items():
        text = text.replace(f"@{key}@", value)
    return text


def _import(bundle, module: str, source: str | None, tmp_path):
    """The bundle's kernel module (or ``source`` in its place), imported here under a package of its own, as a
    caller of the target repository would call it."""
    package = f"r4_{uuid.uuid4().hex[:8]}"
    root = tmp_path / package
    shutil.copytree(bundle / "baseline", root)
    if source is not None:
        (root / module).write_text(source)
    for d in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(".".join([package, *module.removesuffix(".py").split("/")]))
    finally:
        sys.path.remove(str(tmp_path))


def _both(evaluator, source: str, seed: int = 11) -> dict:
    return {p: evaluator.evaluate(source, seed=seed, time_it=False, trials=2, static_policy=False, protocol=p)
            for p in ("verify", "search")}


# ---- 1. layouts: every input the judge draws is dense --------------------------------------------------------

@pytest.fixture(scope="module")
def dense_rows(rms_evaluator) -> dict:
    return _both(rms_evaluator, _source("round4_assumes_dense_rows.py"))


def test_a_kernel_that_assumes_dense_rows_is_wrong_on_a_row_strided_input(rms_bundle, tmp_path):
    """Control: the cheat is wrong where a caller passes a row-strided view (``qkv[:, :H]``), which the baseline
    handles (its kernel takes the row stride; as_rows keeps a strided row layout)."""
    module = "tinyserve/kernels/rms_norm.py"
    base = _import(rms_bundle, module, None, tmp_path)
    cheat = _import(rms_bundle, module, _source("round4_assumes_dense_rows.py"), tmp_path)
    g = torch.Generator().manual_seed(0)
    wide = torch.randn(3, 3 * 256, generator=g).half()
    x, w = wide[:, :256], torch.randn(256, generator=g).half()
    assert torch.allclose(base.rms_norm(x, w).float(), base.rms_norm(x.contiguous(), w).float(), atol=1e-3)
    assert not torch.allclose(cheat.rms_norm(x, w).float(), base.rms_norm(x, w).float(), atol=1e-2)
    assert torch.allclose(cheat.rms_norm(x.contiguous(), w).float(), base.rms_norm(x, w).float(), atol=1e-3)


@pytest.mark.xfail(strict=True, reason=(
    "runners/inputs.py make_inputs: a configured case's tensors are always dense (strided() only applies a "
    "captured case's recorded strides), and runners/judge.py check_case only compares outputs on those inputs; "
    "held-out cases are configured cases too. A kernel that drops the baseline's stride arguments (row * N "
    "addressing, no .contiguous()) is right on everything the judge draws and silently wrong for a caller that "
    "passes a slice of a wider buffer (qkv[:, :H], a strided residual): accepted under both protocols. LLM "
    "rewrites drop strides often, since it is also a little faster. Fix: one more correctness trial per case "
    "with the same values in a padded row layout (each tensor a [..., :n] view of a buffer a few elements wider "
    "per row, and a transposed/expanded layout where shapes allow), kept only where the oracle's output on it "
    "equals its output on the dense layout (the baseline supports it); the candidate must match there too"))
@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_a_kernel_that_assumes_dense_rows_is_refused(dense_rows, protocol):
    ev = dense_rows[protocol]
    assert ev.protocol == protocol
    assert not ev.ok and ev.stage == "correctness", (ev.stage, ev.error)


# ---- 2. the integer values of a captured case: the same in every trial, slot and fill ----------------------------
# A bundle of its own: an MoE-style dispatch whose case was captured from a call (its routing, ``topk_ids``, is
# replayed as recorded; runners/recorded.py), as the capture plugin makes for index tensors.
_DISPATCH = '''"""MoE dispatch: the (token, expert) pairs of topk_ids sorted by expert; out[j] = x[token_j] * weight[expert_j]."""
import torch
import triton
import triton.language as tl


@triton.jit
def _dispatch_kernel(x_ptr, w_ptr, token_ptr, expert_ptr, out_ptr, H, BLOCK_H: tl.constexpr):
    j = tl.program_id(0)
    t = tl.load(token_ptr + j).to(tl.int64)
    e = tl.load(expert_ptr + j).to(tl.int64)
    offs = tl.arange(0, BLOCK_H)
    m = offs < H
    x = tl.load(x_ptr + t * H + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + e * H + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + j.to(tl.int64) * H + offs, (x * w).to(out_ptr.dtype.element_ty), mask=m)


def dispatch(x, weight, topk_ids):
    T, H = x.shape
    K = topk_ids.shape[1]
    flat = topk_ids.reshape(-1).to(torch.int64)
    order = torch.argsort(flat, stable=True)
    token = (order // K).to(torch.int32).contiguous()
    expert = flat[order].to(torch.int32).contiguous()
    out = torch.empty((T * K, H), dtype=x.dtype, device=x.device)
    _dispatch_kernel[(T * K,)](x.contiguous(), weight.contiguous(), token, expert, out, H,
                               BLOCK_H=triton.next_power_of_2(H))
    return out
'''
_DISPATCH_MODULE = "moe/dispatch.py"


def _routing(tokens: int, experts: int, k: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(experts, generator=g)[:k] for _ in range(tokens)]).to(torch.int32)


def dispatch_bundle(dest, dtype: str, symbols: dict):
    """A bundle for the dispatch with one case, captured: its routing (``topk_ids``) recorded and replayed."""
    from runners.recorded import entry
    from runners.task import ArgSpec, Case, TaskSpec, write_task

    (dest / "baseline" / "moe").mkdir(parents=True)
    (dest / "baseline" / _DISPATCH_MODULE).write_text(_DISPATCH)
    ids = _routing(symbols["T"], symbols["E"], symbols["K"], seed=3)
    rec = entry("int32", list(ids.shape), ids.numpy().tobytes())
    spec = TaskSpec(kernel="dispatch", module=_DISPATCH_MODULE, entry="dispatch", files=[_DISPATCH_MODULE],
                    args=[ArgSpec("x", shape=["T", "H"]), ArgSpec("weight", shape=["E", "H"]),
                          ArgSpec("topk_ids", shape=["T", "K"], dtype="int32", low=0, high=symbols["E"])],
                    cases=[Case(symbols=dict(symbols), dtype=dtype, origin="captured",
                                recorded={"topk_ids": rec})])
    write_task(dest, spec)
    return dest


@pytest.fixture(scope="module")
def routing_runs(tmp_path_factory) -> dict:
    from runners.sandbox import Evaluator

    bundle = dispatch_bundle(tmp_path_factory.mktemp("dispatch"), "float32", {"T": 6, "H": 32, "E": 4, "K": 2})
    with Evaluator(bundle, "interpret", timeout=120, trials=3) as ev:
        runs = _both(ev, _source("round4_caches_routing.py"))
        runs["baseline"] = ev.evaluate(ev.baseline, seed=12, time_it=False)
    return {"bundle": bundle, **runs}


def test_a_kernel_that_reads_its_routing_once_is_wrong_on_the_next_routing(routing_runs, tmp_path):
    """Control: called twice with different routing (same shape), as every decode step does, its second answer is
    the first routing's. The baseline itself passes the judge on this bundle."""
    assert routing_runs["baseline"].ok, routing_runs["baseline"].error
    base = _import(routing_runs["bundle"], _DISPATCH_MODULE, None, tmp_path)
    cheat = _import(routing_runs["bundle"], _DISPATCH_MODULE, _source("round4_caches_routing.py"), tmp_path)
    x, w = torch.randn(6, 32), torch.randn(4, 32)
    first, second = _routing(6, 4, 2, seed=3), _routing(6, 4, 2, seed=4)
    assert torch.equal(cheat.dispatch(x, w, first), base.dispatch(x, w, first))
    assert not torch.allclose(cheat.dispatch(x, w, second), base.dispatch(x, w, second))


@pytest.mark.xfail(strict=True, reason=(
    "runners/inputs.py recorded_values/make_inputs and SlotBank._replay: a captured case's integer tensors hold "
    "the values its call passed in every correctness trial, in every timing slot and in every fill of the judge's "
    "window, so every call the judge makes at that shape has the same routing (token ids, block tables, "
    "cu_seqlens, expert ids alike). A kernel that computes what it derives from them (here: the argsort of the "
    "routing and the index arrays, a few launches of a decode step) once per shape and reuses it is right on "
    "everything the judge draws, under both protocols, and on a GPU its timed passes skip that work (a fake "
    "speedup corroborated by the judge's clock, which sees the same replayed values); every real caller gets "
    "stale answers. Fix: keep the recorded values in trial 0, and give later trials and the timing slots other "
    "valid values of the same shape: other calls recorded at that shape (the capture sees many decode steps), "
    "or the recorded values permuted along a declared axis (rows of topk_ids, of a block table), with the "
    "oracle's output as the reference as always; at least one trial at an address that held other values"))
@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_a_kernel_that_reads_its_routing_once_is_refused(routing_runs, protocol):
    ev = routing_runs[protocol]
    assert ev.protocol == protocol
    assert not ev.ok and ev.stage == "correctness", (ev.stage, ev.error)
