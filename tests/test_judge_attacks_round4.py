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


def _both(evaluator, source: str, seed: int = 11, protocols=("verify", "search")) -> dict:
    return {p: evaluator.evaluate(source, seed=seed, time_it=False, trials=1, static_policy=False, protocol=p)
            for p in protocols}


# Holes of this round that the judge now closes run under the full protocol only (their fixes are trials of
# runners/judge.py check_case, the same under both protocols): the suite's time goes to the open ones.
_FIXED = ("verify",)


# ---- 1. layouts: every input the judge draws is dense --------------------------------------------------------

@pytest.fixture(scope="module")
def dense_rows(rms_evaluator) -> dict:
    return _both(rms_evaluator, _source("round4_assumes_dense_rows.py"), protocols=_FIXED)


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


# (Was a hole, found this round: every input the judge drew was dense, and a rewrite that drops the baseline's
# stride arguments was accepted under both protocols. runners/judge.py _check_layout now runs one more trial per
# case on row-padded inputs where the baseline takes them.)
@pytest.mark.parametrize("protocol", _FIXED)
def test_a_kernel_that_assumes_dense_rows_is_refused(dense_rows, protocol):
    ev = dense_rows[protocol]
    assert ev.protocol == protocol
    assert not ev.ok and ev.stage == "correctness" and "wider buffer" in ev.error, (ev.stage, ev.error)


@pytest.fixture(scope="module")
def one_stride(rms_evaluator) -> dict:
    return _both(rms_evaluator, _source("round4_one_stride_for_all_rows.py"), protocols=_FIXED)


def test_one_row_stride_for_every_input_is_wrong_on_a_strided_input_beside_a_dense_one(rms_bundle, tmp_path):
    """Control: hidden_states a slice of a wider buffer, residual dense (the baseline takes each tensor's own
    stride); the cheat reads the residual with hidden_states' stride."""
    module = "tinyserve/kernels/rms_norm.py"
    base = _import(rms_bundle, module, None, tmp_path)
    cheat = _import(rms_bundle, module, _source("round4_one_stride_for_all_rows.py"), tmp_path)
    g = torch.Generator().manual_seed(1)
    x, w, r = torch.randn(5, 3 * 96, generator=g).half()[:, :96], torch.randn(96, generator=g).half(), \
        torch.randn(5, 96, generator=g).half()
    want, got = base.rms_norm(x, w, residual=r), cheat.rms_norm(x, w, residual=r)
    assert torch.allclose(want[0].float(), base.rms_norm(x.contiguous(), w, residual=r)[0].float(), atol=1e-3)
    assert not torch.allclose(got[1].float(), want[1].float(), atol=1e-2)
    same = cheat.rms_norm(x.contiguous(), w, residual=r.contiguous())
    assert torch.allclose(same[0].float(), want[0].float(), atol=1e-3, rtol=1e-2)


# (Was a hole, found this round: the layout trial padded every input by the same amount, so a second input
# addressed with the first one's stride passed. runners/layouts.py row_padded now pads each by its own amount.)
@pytest.mark.parametrize("protocol", _FIXED)
def test_one_row_stride_for_every_input_is_refused(one_stride, protocol):
    ev = one_stride[protocol]
    assert ev.protocol == protocol
    assert not ev.ok and ev.stage == "correctness", (ev.stage, ev.error)




@pytest.fixture(scope="module")
def rotary_bundle(tmp_path_factory):
    from bot.config import load_config, task_spec
    from conftest import EXAMPLE

    from runners.extract import build_bundle

    spec = task_spec("apply_rotary_pos_emb", load_config(EXAMPLE).kernels["apply_rotary_pos_emb"], "interpret")
    bundle = tmp_path_factory.mktemp("rotary")
    build_bundle(EXAMPLE, spec, bundle)
    return bundle


@pytest.fixture(scope="module")
def token_stride(rotary_bundle) -> dict:
    from runners.sandbox import Evaluator

    with Evaluator(rotary_bundle, "interpret", timeout=120, trials=1) as ev:
        return _both(ev, _source("round4_token_stride_from_head_stride.py"), protocols=_FIXED)


def test_a_token_stride_derived_from_the_head_stride_is_wrong_on_a_split_qkv(rotary_bundle, tmp_path):
    """Control: q and k split from one fused qkv buffer (token stride (HQ + 2*HK) * D), as attention layers call
    rotary; the baseline takes each stride, the cheat reads other tokens' heads."""
    module = "tinyserve/kernels/rotary_embedding.py"
    base = _import(rotary_bundle, module, None, tmp_path)
    cheat = _import(rotary_bundle, module, _source("round4_token_stride_from_head_stride.py"), tmp_path)
    g = torch.Generator().manual_seed(2)
    T, HQ, HK, D = 5, 4, 2, 32
    qkv = torch.randn(T, (HQ + 2 * HK) * D, generator=g).half()
    q, k = qkv[:, :HQ * D].view(T, HQ, D), qkv[:, HQ * D:(HQ + HK) * D].view(T, HK, D)
    cos, sin = torch.rand(T, D, generator=g).half() * 2 - 1, torch.rand(T, D, generator=g).half() * 2 - 1
    want = base.apply_rotary_pos_emb(q, k, cos, sin)
    dense = base.apply_rotary_pos_emb(q.contiguous(), k.contiguous(), cos, sin)
    assert all(torch.allclose(a.float(), b.float(), atol=1e-3) for a, b in zip(want, dense))
    got = cheat.apply_rotary_pos_emb(q, k, cos, sin)
    assert not torch.allclose(got[0].float(), want[0].float(), atol=1e-2)
    same = cheat.apply_rotary_pos_emb(q.contiguous(), k.contiguous(), cos, sin)
    assert all(torch.allclose(a.float(), b.float(), atol=1e-3) for a, b in zip(same, want))


# Was a hole: row_padded padded the innermost rows only, so a 3-D input's token stride was always heads x head
# stride; a rotary kernel deriving it that way passed and was wrong on q and k split from a fused qkv. Closed by a
# second layout trial with every level padded (runners/judge.py _check_layout).
@pytest.mark.parametrize("protocol", _FIXED)
def test_a_token_stride_derived_from_the_head_stride_is_refused(token_stride, protocol):
    ev = token_stride[protocol]
    assert ev.protocol == protocol
    assert not ev.ok and ev.stage == "correctness", (ev.stage, ev.error)

# ---- 1b. values: every input the judge draws is finite -----------------------------------------------------------

@pytest.fixture(scope="module")
def softmax_bundle(tmp_path_factory):
    from bot.config import load_config, task_spec
    from conftest import EXAMPLE

    from runners.extract import build_bundle

    spec = task_spec("softmax", load_config(EXAMPLE).kernels["softmax"], "interpret")
    bundle = tmp_path_factory.mktemp("softmax")
    build_bundle(EXAMPLE, spec, bundle)
    return bundle


@pytest.fixture(scope="module")
def softmax_runs(softmax_bundle) -> dict:
    from runners.sandbox import Evaluator

    with Evaluator(softmax_bundle, "interpret", timeout=120, trials=3) as ev:
        return {"unguarded": _both(ev, _source("round4_online_softmax_without_inf_guard.py"), protocols=_FIXED),
                "tail_first": _both(ev, _source("round4_online_softmax_tail_first.py"), protocols=_FIXED)}


def test_an_online_softmax_without_the_inf_guard_is_wrong_on_a_masked_row(softmax_bundle, tmp_path):
    """Control: a row whose first 150 of 200 scores are masked (-inf) is NaN from the cheat, a distribution over
    the other 50 from the baseline; on finite rows the two agree."""
    module = "tinyserve/kernels/softmax.py"
    base = _import(softmax_bundle, module, None, tmp_path)
    cheat = _import(softmax_bundle, module, _source("round4_online_softmax_without_inf_guard.py"), tmp_path)
    x = torch.randn(6, 200, generator=torch.Generator().manual_seed(0)).half()
    assert torch.allclose(cheat.softmax(x).float(), base.softmax(x).float(), atol=1e-4)
    x[2, :150] = float("-inf")
    want, got = base.softmax(x).float(), cheat.softmax(x).float()
    assert not want.isnan().any() and abs(float(want[2].sum()) - 1.0) < 1e-2
    assert got[2].isnan().all()


# (Was a hole, found this round: no trial held -inf, and the unguarded one-pass softmax was accepted under both
# protocols. runners/judge.py _check_masked now runs a masked-rows trial where the baseline's outputs stay finite.)
@pytest.mark.parametrize("protocol", _FIXED)
def test_an_online_softmax_without_the_inf_guard_is_refused(softmax_runs, protocol):
    ev = softmax_runs["unguarded"][protocol]
    assert ev.protocol == protocol
    assert not ev.ok and ev.stage == "correctness", (ev.stage, ev.error)


def test_an_unguarded_softmax_walking_from_the_end_is_wrong_on_a_masked_suffix(softmax_bundle, tmp_path):
    """Control: right on finite rows and on a masked prefix (what the judge's masked trial holds), NaN on a row
    whose last 150 of 200 scores are masked (a causal mask's future positions, right padding)."""
    module = "tinyserve/kernels/softmax.py"
    base = _import(softmax_bundle, module, None, tmp_path)
    cheat = _import(softmax_bundle, module, _source("round4_online_softmax_tail_first.py"), tmp_path)
    x = torch.randn(6, 200, generator=torch.Generator().manual_seed(0)).half()
    x[0, :150] = float("-inf")
    assert torch.allclose(cheat.softmax(x).float(), base.softmax(x).float(), atol=1e-4)
    x[2, 50:] = float("-inf")
    want, got = base.softmax(x).float(), cheat.softmax(x).float()
    assert not want.isnan().any() and abs(float(want[2].sum()) - 1.0) < 1e-2
    assert got[2].isnan().all()


# (Was a hole, found this round: the masked trial masked a prefix only, and a softmax walking the row from its end
# passed it. runners/layouts.py masked_rows now masks a prefix, a suffix and a middle run.)
@pytest.mark.parametrize("protocol", _FIXED)
def test_an_unguarded_softmax_walking_from_the_end_is_refused(softmax_runs, protocol):
    ev = softmax_runs["tail_first"][protocol]
    assert ev.protocol == protocol
    assert not ev.ok and ev.stage == "correctness", (ev.stage, ev.error)


# ---- 2. the integer values of a captured case: the same in every trial, slot and fill ----------------------------
# A bundle of its own: an MoE-style dispatch whose case was captured from a call (its routing, ``topk_ids``, is
# replayed as recorded; runners/recorded.py), as the capture plugin makes for index tensors.
_DISPATCH = '''"""MoE dispatch: the (token, expert) pairs of topk_ids sorted by expert; out[j] = x[token_j] * w[expert_j]."""
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


def dispatch_bundle(dest, dtype: str, symbols: dict, calls: int = 1):
    """A bundle for the dispatch with one case, captured: its routing (``topk_ids``) recorded and replayed; with
    ``calls`` > 1, the routing of that many calls recorded at the case (``Case.variants``)."""
    from runners.recorded import add_variant, entry
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
    for seed in range(4, 3 + calls):
        ids = _routing(symbols["T"], symbols["E"], symbols["K"], seed=seed)
        assert add_variant(spec.cases[0], {"topk_ids": entry("int32", list(ids.shape), ids.numpy().tobytes())})
    write_task(dest, spec)
    return dest


@pytest.fixture(scope="module")
def routing_runs(tmp_path_factory) -> dict:
    from runners.sandbox import Evaluator

    bundle = dispatch_bundle(tmp_path_factory.mktemp("dispatch"), "float32", {"T": 6, "H": 32, "E": 4, "K": 2})
    with Evaluator(bundle, "interpret", timeout=120, trials=3) as ev:
        runs = _both(ev, _source("round4_caches_routing.py"))
        runs["baseline"] = ev.evaluate(ev.baseline, seed=12, time_it=False, trials=1)
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


def test_a_kernel_that_reads_its_routing_once_is_refused_where_the_tests_made_several_calls(tmp_path_factory):
    """Closed where the capture recorded more than one call at the case: later trials take the other calls'
    routing (Case.variants), and the cheat's second answer is the first routing's."""
    from runners.sandbox import Evaluator

    bundle = dispatch_bundle(tmp_path_factory.mktemp("dispatch3"), "float32", {"T": 6, "H": 32, "E": 4, "K": 2},
                             calls=3)
    with Evaluator(bundle, "interpret", timeout=120, trials=3) as ev:
        cheat = ev.evaluate(_source("round4_caches_routing.py"), seed=11, time_it=False, trials=3,
                            static_policy=False)
        honest = ev.evaluate(ev.baseline, seed=12, time_it=False, trials=3)
    assert honest.ok, honest.error
    assert not cheat.ok and cheat.stage == "correctness" and "trial 1" in cheat.error, (cheat.stage, cheat.error)


@pytest.mark.xfail(strict=True, reason=(
    "runners/inputs.py recorded_values/make_inputs and SlotBank: a captured case's integer tensors hold the values "
    "of the calls recorded at it, and a case made from ONE recorded call (the repository's test called that shape "
    "once; this bundle) holds the same values in every correctness trial, every timing slot and every fill of the "
    "judge's window (Case.variants, the fix for several recorded calls, has nothing to rotate), so every call the "
    "judge makes at that shape has the same routing (token ids, block tables, cu_seqlens, expert ids alike). A "
    "kernel that computes what it derives from them (here: the argsort of the routing and the index arrays, a few "
    "launches of a decode step) once per shape and reuses it is right on everything the judge draws, under both "
    "protocols, and on a GPU its timed passes skip that work (a fake speedup the judge's clock sees too); every "
    "real caller gets stale answers. With variants, a kernel that memoises by exact content on the device (at "
    "most 4 sets, recycled over 8192 slots) keeps the fake speedup. Fix: variants the judge makes itself where the "
    "capture has none, from a validity-preserving transform declared per argument (`vary: permute-rows` for "
    "topk_ids or a block table: a random permutation of rows, or of the values within the recorded multiset), "
    "fresh per trial and per fill, with the oracle's output as the reference as always"))
@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_a_kernel_that_reads_its_routing_once_is_refused(routing_runs, protocol):
    ev = routing_runs[protocol]
    assert ev.protocol == protocol
    assert not ev.ok and ev.stage == "correctness", (ev.stage, ev.error)


# ---- 3. work deferred to a later slot: the timed passes call the entry in slot order, on rows of one block -------
# A judge of its own on the timed stand-in, with more slots than round 3's (12 in the samples and in the window:
# enough for a group of 6 to show), both protocols in one judge.
_JUDGE4 = r"""
import dataclasses, json, os, sys
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, {root!r})
from runners import backends
from runners.backends.base import Backend
from runners.judge import Protocol
from runners.sandbox import Evaluator

bundle, runs = sys.argv[1], json.loads(sys.argv[2])
backend = "cpu-timed-stand-in"
backends.BACKENDS[backend] = Backend(name=backend, device="cpu", timed=True, warp_size=32,
                                     env_set={{"TRITON_INTERPRET": "1"}})
base = Protocol(min_rounds=4, max_rounds=4, case_time_cap_s=0.2, sample_us=1.0, slot_us=1e9, window_us=1e9,
                window_rounds=3, corroboration_tolerance=0.5, window_lead_cycles=0, window_retries=0)
results = []
with Evaluator(bundle, backend, timeout=120, trials=1, spare=False, protocol=base) as ev:
    ev._peak = (1e12, 1 << 40)  # no bandwidth probe on the CPU: plausibility by the speedup bound only
    for source, protocol, seed, numbers in runs:  # numbers: the protocol's slot counts for this run (and timeout)
        numbers = dict(numbers)
        ev.timeout = numbers.pop("timeout", 120)
        ev.protocol = dataclasses.replace(base, **numbers)
        ev.search_protocol = dataclasses.replace(ev.protocol, window_every_case=False, profile_every_case=False,
                                                 name="search")
        r = ev.evaluate(ev.baseline if source == "BASELINE" else source, seed=seed, time_it=True, trials=1,
                        static_policy=False, protocol=protocol)
        results.append({{"stage": r.stage, "ok": r.ok, "error": r.error or "", "protocol": r.protocol,
                         "speedups": [c.speedup for c in r.cases], "judge_ratios": [c.judge_ratio for c in r.cases],
                         "window_ms": [c.window_ms for c in r.cases], "messages": [c.message for c in r.cases],
                         "parts": [c.window_parts for c in r.cases]}})
print("RESULTS " + json.dumps(results))
"""


def _timed_judge(bundle, tmp_path, runs: list[tuple[str, str, int, dict]], symbols: dict,
                 values: dict | None = None, one_thread: bool = False) -> list[dict]:
    """Evaluate (source or "BASELINE", protocol, seed, protocol numbers and an optional "timeout") with a judge of
    their own on the timed stand-in, on a copy of the bundle reduced to one case with ``symbols`` (and ``values``:
    scalars fixed at the case); ``one_thread``: torch on one thread in each worker."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    task = yaml.safe_load((copy / "task.yaml").read_text())
    task["cases"] = [{**task["cases"][0], "symbols": symbols, **({"values": values} if values else {})}]
    (tmp_path / "shim.py").write_text(_SHIM.replace("import torch\n", "import torch\ntorch.set_num_threads(1)\n", 1)
                                      if one_thread else _SHIM)
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tmp_path / "shim.py"}" "$@"\n')
    wrapper.chmod(0o755)
    task["python"] = str(wrapper)
    (copy / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    proc = subprocess.run([sys.executable, "-c", _JUDGE4.format(root=str(ROOT)), str(copy), json.dumps(runs)],
                          check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULTS "):])


GROUP = 6  # calls per launch in the timed passes; 12 slots a pass


def _seeds_whose_reveals_miss(slot: int, count: int, reveal: int, want: int, hit: bool = False) -> list[int]:
    """Seeds for which the judge's window shows ``slot`` in none of its three rounds (``hit``: in at least one),
    as runners/judge_clock.py _corroborate draws them today (one case, index 0; the secret is the seed)."""
    from runners.protocol import trial_seed

    def shows(s: int) -> bool:
        return any(slot in torch.randperm(count, generator=torch.Generator().manual_seed(
            trial_seed(s, 60_000 + r, 0)))[:reveal].tolist() for r in range(3))

    return [s for s in range(1, 1000) if shows(s) == hit][:want]


@pytest.fixture(scope="module")
def timed_runs(rms_bundle, tmp_path_factory) -> dict:
    """Every timing attack of this round, one after the other, against one judge on the timed stand-in."""
    batched = _source("round4_batches_across_slots.py", GROUP=str(GROUP))
    twelve = {"max_slots": 12, "max_window_slots": 12, "reveal_slots": 12}
    skipper = _source("round4_skips_unshown_slots.py", MIN_NUMEL="1")
    # a prefill-like window: 12 slots, 2 shown a round (the fetch budget's floor); the cheat skips slot 11
    prefill = {"max_slots": 12, "max_window_slots": 12, "reveal_slots": 2}
    missed = _seeds_whose_reveals_miss(11, 12, 2, 2)
    ahead = _source("round4_computes_ahead_of_its_calls.py", GROUP=str(GROUP))
    runs = _timed_judge(rms_bundle, tmp_path_factory.mktemp("timed4"),
                        [(batched, "verify", 5, twelve), (batched, "search", 6, twelve),
                         (skipper, "verify", missed[0], prefill), (skipper, "search", missed[1], prefill),
                         (ahead, "verify", 7, twelve), (ahead, "search", 8, twelve)],
                        {"T": 1, "H": 64}, {"eps": 1e-6})  # eps fixed: drawn per slot, it catches the batcher's one
    # eps a group, which a kernel without a range scalar does not have
    return {"batched": dict(zip(["verify", "search"], runs[:2])), "skipped": dict(zip(["verify", "search"], runs[2:4])),
            "ahead": dict(zip(["verify", "search"], runs[4:]))}


def _clock_saw_no_speedup(ev: dict, bound: float = 1.3) -> bool:
    """The judge held: it credited no more than ``bound``, or it refused at timing with its own clock seeing no
    more than that. (A refusal where the clock itself saw the batched pass's speedup is the stand-in's noise on a
    loaded machine moving the claim past the allowance, not the judge seeing through the cheat.)"""
    if ev["ok"]:
        return all((s or 0.0) <= bound for s in ev["speedups"])
    if ev["stage"] != "timing":
        return False
    seen = [s / r for s, r in zip(ev["speedups"], ev["judge_ratios"]) if s and r]
    return all(x <= bound for x in seen)


def test_a_kernel_that_batches_across_slots_is_honest_outside_them(rms_evaluator):
    """Control: outside the rotating slots the cheat is the baseline's kernel, right on every case and trial (the
    judge's correctness stage has nothing to see)."""
    ev = rms_evaluator.evaluate(_source("round4_batches_across_slots.py", GROUP=str(GROUP)), seed=13, time_it=False,
                                trials=1, static_policy=False)
    assert ev.ok, ev.error


@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_work_deferred_to_a_later_slot_earns_no_credit(timed_runs, protocol):
    """(Was a hole, credited 3-8x on this stand-in under both protocols: every output was right when the pass ended,
    which was all the judge checked.) A call reads its slot index and the slot count from its tensor's storage,
    returns a view into an output block of its own and launches nothing; the last call of each group of 6 launches
    one kernel over the group. The judge's checkpoints (runners/checkpoints.py) read a few values of a call's outputs
    right after the call, at calls drawn in secret: here they are the previous pass's."""
    ev = timed_runs["batched"][protocol]
    assert ev["protocol"] == protocol, ev
    assert not ev["ok"] and ev["stage"] == "timing", json.dumps(ev)
    assert "read right after that call" in ev["error"] and "checkpoints" in ev["error"], ev["error"]


def test_a_kernel_that_computes_ahead_is_honest_outside_the_slots(rms_evaluator):
    """Control: outside the rotating slots the cheat that works ahead is the baseline's kernel."""
    ev = rms_evaluator.evaluate(_source("round4_computes_ahead_of_its_calls.py", GROUP=str(GROUP)), seed=14,
                                time_it=False, trials=1, static_policy=False)
    assert ev.ok, ev.error


@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_work_done_ahead_of_its_calls_is_refused(timed_runs, protocol):
    """The batcher turned around: the first call of each group of 6 computes the whole group from the inputs that
    already lie in the later slots, and the later calls launch nothing. Each output is written before its call
    returns, so the traces alone would hold; the checkpoints' links rewrite a few values of the next call's input
    right after a call (runners/checkpoints.py), and the outputs computed ahead from the old values are wrong."""
    ev = timed_runs["ahead"][protocol]
    assert ev["protocol"] == protocol, ev
    assert not ev["ok"] and ev["stage"] == "timing" and "wrong" in ev["error"], json.dumps(ev)


# ---- 4. the GPU forms (run on the H200: `python -m pytest -m gpu tests/test_judge_attacks_round4.py`) -----------
# Predictions made without a GPU, from the judge's code and the CPU runs above: strict xfails that say "passes
# through"; an XPASS there means the judge held on the GPU (or the cheat did not run: the first assert says which).
_needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (see bench/gpu_checks.sh)")


@pytest.fixture(scope="module")
def gpu_rms_evaluator(tmp_path_factory):
    from bot.config import load_config, task_spec
    from conftest import EXAMPLE

    from runners.extract import build_bundle
    from runners.sandbox import Evaluator

    spec = task_spec("rms_norm", load_config(EXAMPLE).kernels["rms_norm"], "triton")
    bundle = tmp_path_factory.mktemp("gpu-r4-rms")
    build_bundle(EXAMPLE, spec, bundle)
    with Evaluator(bundle, "triton", timeout=300, trials=2) as evaluator:
        yield evaluator


def _gpu_summary(ev) -> tuple:
    return ev.stage, ev.error[:400], [(c.case, c.speedup, c.judge_ratio, c.claimed_us, c.timing_method)
                                      for c in ev.cases]


def _credited_nothing(ev, bound: float = 1.10) -> bool:
    return (not ev.ok and ev.stage in ("timing", "plausibility")) or all((c.speedup or 0.0) <= bound
                                                                       for c in ev.cases)


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_gpu_work_deferred_to_a_later_slot_earns_no_credit(gpu_rms_evaluator, protocol):
    """Refused at the first decode case under both protocols. On the H200 (session 14, bench/results/evaluator-h200/
    session14/) the refusal names a shown slot, not a trace: the links overwrite a few values of the next call's
    inputs after a checkpoint, and the group launched later reads them, so the pass's last outputs are already wrong
    (7 of 4096 elements in the verify run, 2935 in the search run). The stand-in (section 3) names the traces. Before
    the checkpoints it was predicted at about 3-4x claimed and corroborated at the decode cases."""
    ev = gpu_rms_evaluator.evaluate(_source("round4_batches_across_slots.py", GROUP="4"), seed=21, time_it=True,
                                    trials=2, static_policy=False, protocol=protocol)
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), _gpu_summary(ev)
    assert _credited_nothing(ev), _gpu_summary(ev)
    assert not ev.ok and ev.stage == "timing" and ("checkpoints" in ev.error or "outputs of the timed calls are wrong"
                                                   in ev.error), _gpu_summary(ev)


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_gpu_work_done_ahead_of_its_calls_earns_no_credit(gpu_rms_evaluator, protocol):
    """As on the stand-in (section 3): the checkpoints' links make the outputs computed ahead wrong (prediction)."""
    ev = gpu_rms_evaluator.evaluate(_source("round4_computes_ahead_of_its_calls.py", GROUP="4"), seed=23,
                                    time_it=True, trials=2, static_policy=False, protocol=protocol)
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), _gpu_summary(ev)
    assert not ev.ok and ev.stage == "timing" and "wrong" in ev.error, _gpu_summary(ev)


@pytest.fixture(scope="module")
def gpu_dispatch_evaluator(tmp_path_factory):
    from runners.sandbox import Evaluator

    bundle = tmp_path_factory.mktemp("gpu-r4-dispatch")
    dispatch_bundle(bundle, "float16", {"T": 16, "H": 4096, "E": 8, "K": 2})
    with Evaluator(bundle, "triton", timeout=300, trials=2) as evaluator:
        yield evaluator


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("protocol", ["verify", "search"])
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "prediction (H200): as in section 2. The baseline's routing metadata (argsort of 32 expert ids, a division, "
    "two casts, a gather: 6-8 small kernels, more if torch.sort's temporary storage is not capturable and the "
    "baseline falls back to cuda-events) is skipped in every timed call, since the window's fill replays the "
    "recorded routing: the dispatch kernel alone, about 3-6x claimed and seen by the judge's clock. Expected: ok, "
    "credited about 3-6x (quarantined only if it exceeds the 10x bound). Fix: as in section 2"))
def test_gpu_routing_read_once_earns_no_credit(gpu_dispatch_evaluator, protocol):
    ev = gpu_dispatch_evaluator.evaluate(_source("round4_caches_routing.py"), seed=22, time_it=True, trials=2,
                                         static_policy=False, protocol=protocol)
    assert ev.stage not in ("compile", "crashed", "baseline", "kernel"), _gpu_summary(ev)
    assert (not ev.ok and ev.stage == "correctness") or _credited_nothing(ev), _gpu_summary(ev)


# ---- 5. calls skipped where the window shows too few slots ---------------------------------------------------

def test_a_skipping_kernel_hands_back_stale_outputs_in_a_pass(rms_bundle, tmp_path):
    """Control, without the judge: two passes over a 12-slot bank with new values in between, as the window runs
    them; slot 11 of the second pass holds the first pass's answer, every other slot the right one."""
    import dataclasses

    from runners.inputs import SlotBank
    from runners.task import read_task

    spec = read_task(rms_bundle)
    module = spec.module
    base = _import(rms_bundle, module, None, tmp_path)
    cheat = _import(rms_bundle, module, _source("round4_skips_unshown_slots.py", MIN_NUMEL="1"), tmp_path)
    bank = SlotBank(spec.args, dataclasses.replace(spec.cases[0], symbols={"T": 1, "H": 256}), "cpu", 12)
    bank.fill(1)
    first = [cheat.rms_norm(**kw).clone() for kw in bank.slots]
    bank.fill(2)
    second = [cheat.rms_norm(**kw).clone() for kw in bank.slots]
    want = [base.rms_norm(**kw) for kw in bank.slots]
    assert all(torch.allclose(second[k].float(), want[k].float(), atol=1e-3, rtol=4e-3) for k in range(11))
    assert torch.equal(second[11], first[11]) and not torch.allclose(second[11].float(), want[11].float(), atol=1e-2)


@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_calls_skipped_where_the_window_shows_few_slots_are_refused(timed_runs, protocol):
    """(Was a hole: the judge checked only the slots it showed in full, at large sizes 2 of 13-48 a round, and a
    candidate that skipped the last twelfth of a pass's slots was missed with probability (10/12)^3 = 0.58 here, 0.45
    over RMSNorm's two T=4096 cases.) Every slot is now opened after each pass (runners/openings.py): chunks drawn in
    secret, each with its hash-tree path up to the slot's committed hash, compared with the oracle's. The seeds are
    ones whose full reveals miss the skipped slot in all three rounds."""
    ev = timed_runs["skipped"][protocol]
    assert ev["protocol"] == protocol, ev
    # refused for the skipped slot itself: a quarantine of the claim is the stand-in's host-clock noise on a
    # loaded machine (CI once refused the cheat that way, and this strict xfail passed by chance)
    assert not ev["ok"] and ev["stage"] == "timing" and "slot" in ev["error"], json.dumps(ev)
    assert "quarantined" not in ev["error"] and "opened chunk" in ev["error"], json.dumps(ev)



@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_gpu_calls_skipped_where_the_window_shows_few_slots_are_refused(gpu_rms_evaluator, protocol):
    """At the T=4096 cases (indices 6 and 7) the window has 47 slots and shows 2 a round; the cheat skips slots 44-46
    of the window and 1 of the 5 sample slots, and seed 1's full reveals miss slots 44-46 at both cases in all three
    rounds (was a hole, predicted: credited about 1.07-1.12x). The openings check every slot. A prediction: not yet
    run on the H200."""
    ev = gpu_rms_evaluator.evaluate(_source("round4_skips_unshown_slots.py"), seed=1, time_it=True, trials=2,
                                    static_policy=False, protocol=protocol)
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), _gpu_summary(ev)
    assert not ev.ok and ev.stage == "timing", _gpu_summary(ev)
