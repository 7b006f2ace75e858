"""Round 6: attacks on what the fifth session changed in the judge: the binding commitments of the judge's window
(runners/timing.py ``digest``/``CommitPlan``, runners/judge_clock.py ``_window_hashes``), the layout trial's finite
padding carried with the storage (runners/layouts.py ``padding_like``/``row_padded``, runners/wire.py ``storage``),
the lead-credit rule and the preload's device warm-up.

Each attack has a cheat in tests/cheats/round6_*.py, a control showing what it does outside the judge (wrong on a
caller's input, or the mechanism on its own), and the judge's verdict. All five are closed (the tree digest and the
in-place writes while this round ran; the fill's foldable scaling, the layout trial's fixed pad widths and its
padding bounded by the view's values after it): plain tests, with the hole described above each. Timing attacks
run on the timed CPU stand-in of tests/test_judge_attacks.py through round 4's judge of their own
(``_timed_judge``); their GPU forms are predictions (gpu-marked, skipped here; the H200 refused them all).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import types

import pytest
import torch
from conftest import CHEATS, EXAMPLE, ROOT
from test_judge_attacks_round4 import (  # noqa: F401
    _gpu_summary,
    _import,
    _needs_gpu,
    _seeds_whose_reveals_miss,
    _source,
    _timed_judge,
    gpu_rms_evaluator,
)

from runners.inputs import SlotBank
from runners.layouts import row_padded
from runners.task import read_task
from runners.commitments import _constant, commitments, digest

PAD_WIDTHS = "round6_strides_only_at_the_judges_pad_widths.py"
INSIDE = "round6_strides_only_on_padding_inside_the_view.py"
DIGEST = "round6_forges_the_window_digest.py"
IN_PLACE = "round6_in_place_skips_unchecked_slots.py"
FILL = "round6_sheds_the_fills_scaling.py"
SGLITE = ROOT / "examples" / "sglite"


def test_the_policy_lets_the_kernel_level_cheats_through():
    """The layout cheats and the in-place skipper touch no worker code: the static policy has nothing to refuse in
    them: the judge alone must hold (it does since the fixes)."""
    from runners.policy import check_source

    rms = (EXAMPLE / "tinyserve" / "kernels" / "rms_norm.py").read_text()
    norm = (SGLITE / "python" / "sglite" / "srt" / "layers" / "elementwise" / "fused_add_rms_norm.py").read_text()
    for cheat, baseline, entry in ((PAD_WIDTHS, rms, "rms_norm"), (INSIDE, rms, "rms_norm"),
                                   (IN_PLACE, norm, "fused_add_rms_norm")):
        assert check_source(_source(cheat), baseline, entry) == [], cheat


def _qkv_slice(seed: int, rows: int = 6, width: int = 96) -> tuple[torch.Tensor, torch.Tensor]:
    """q of a fused qkv (``qkv[:, :H]``, row stride 3H; k and v are data of their own), and q's values, dense."""
    qkv = torch.randn(rows, 3 * width, generator=torch.Generator().manual_seed(seed))
    return qkv[:, :width], qkv[:, :width].contiguous()


# ---- 1. the layout trial is still told from a caller's slice ----------------------------------------------------

def test_a_kernel_that_takes_strides_only_at_the_judges_pad_widths_is_wrong_on_a_real_slice(rms_bundle, tmp_path):
    """Control: the cheat was right on every layout the trial drew while its pads were 64 * (argument index + 1)
    bytes; the pads are drawn per trial since (runners/layouts.py ``_pad_elems``), and it is wrong on most of them,
    as on q of a fused qkv (a pad of 2H) where the baseline is right."""
    module = read_task(rms_bundle).module
    base = _import(rms_bundle, module, None, tmp_path)
    cheat = _import(rms_bundle, module, _source(PAD_WIDTHS), tmp_path)
    w = torch.rand(96) + 0.5
    wrong = 0
    for seed in range(8):
        x = torch.randn(6, 96, generator=torch.Generator().manual_seed(100 + seed))
        padded = row_padded({"x": x}, gen=torch.Generator().manual_seed(seed))[0]["x"]
        assert torch.allclose(base.rms_norm(padded, w), base.rms_norm(x, w), atol=1e-5)
        wrong += int(not torch.allclose(cheat.rms_norm(padded, w), base.rms_norm(x, w), atol=1e-5))
    assert wrong >= 4
    q, dense = _qkv_slice(1)
    assert torch.allclose(base.rms_norm(q, w), base.rms_norm(dense, w), atol=1e-5)
    assert not torch.allclose(cheat.rms_norm(q, w), base.rms_norm(dense, w), atol=1e-2)


def test_a_kernel_that_takes_strides_only_at_the_judges_pad_widths_is_refused(rms_evaluator):
    ev = rms_evaluator.evaluate(_source(PAD_WIDTHS), seed=31, time_it=False, static_policy=False)
    assert not ev.ok and ev.stage == "correctness" and "slices of a wider buffer" in ev.error, (ev.stage, ev.error)


def test_the_judges_padding_reaches_past_the_views_range_as_a_callers_does(rms_bundle, tmp_path):
    """Control: the trial's padding was a convex combination of two of the view's values (inside [min, max] of the
    view, always), and the cheat that takes the strides only when it is inside was right on the trial; it is drawn
    past the view's extremes since (runners/layouts.py ``padding_like``, w in [-1, 2)), as the neighbours of q in a
    fused qkv are, where the cheat is wrong."""
    module = read_task(rms_bundle).module
    base = _import(rms_bundle, module, None, tmp_path)
    cheat = _import(rms_bundle, module, _source(INSIDE), tmp_path)
    w = torch.rand(96) + 0.5
    outside = 0
    for seed in range(8):
        x = torch.randn(6, 96, generator=torch.Generator().manual_seed(200 + seed))
        x[0] *= 1e-4  # a later trial's near-zero row and wide row
        x[-1] *= 30.0
        padded = row_padded({"x": x}, gen=torch.Generator().manual_seed(seed))[0]["x"]
        outside += int(not cheat._padding_inside_the_view(padded))  # since the fix: past the view's extremes
    assert outside >= 4
    q, dense = _qkv_slice(2)
    assert not cheat._padding_inside_the_view(q)
    assert torch.allclose(base.rms_norm(q, w), base.rms_norm(dense, w), atol=1e-5)
    assert not torch.allclose(cheat.rms_norm(q, w), base.rms_norm(dense, w), atol=1e-2)


def test_a_kernel_that_takes_strides_only_on_padding_inside_the_view_is_refused(rms_evaluator):
    ev = rms_evaluator.evaluate(_source(INSIDE), seed=32, time_it=False, static_policy=False)
    assert not ev.ok and ev.stage == "correctness" and "slices of a wider buffer" in ev.error, (ev.stage, ev.error)


# ---- 2. the window's digest is steered after the shown slots are known ---------------------------------------

_M = (1 << 64) - 1


def _undo(r: int, b: int, alpha: int) -> int:
    """The first word of runners/timing.py ``_compress`` from its result and second word (no search)."""
    u = (r * pow(2 * b + 1, -1, 1 << 64)) & _M
    return ((((u >> 32) | (u << 32)) & _M) - alpha * b) & _M


def _steer_leaf0(hashes: list[int], key: int, root: int) -> list[int]:
    """``hashes`` with entry 0 chosen so that their ``digest`` is ``root`` (what the cheat does, written apart)."""
    from runners.commitments import _padded_words

    def compress(a: int, b: int, alpha: int) -> int:
        s = (a + alpha * b) & _M
        return ((((s >> 32) | (s << 32)) & _M) * (2 * b + 1)) & _M

    k, n = key ^ 0x5A5A, len(hashes)
    x = [h & _M for h in hashes] + [0] * (_padded_words(8 * n) - n)
    levels = []
    while len(x) > 1:
        x = x + [0] * (len(x) % 2)
        levels.append(x)
        alpha = (_constant(k, len(levels) - 1) | 1) & _M
        x = [compress(x[2 * i], x[2 * i + 1], alpha) for i in range(len(x) // 2)]
    tail = _constant(k, 1000 + 8 * n) & _M
    target = _undo(_undo(root & _M, tail, (_constant(k, 998) | 1) & _M), tail, (_constant(k, 999) | 1) & _M)
    for level in reversed(range(len(levels))):
        target = _undo(target, levels[level][1], (_constant(k, level) | 1) & _M)
    leaf = target - (1 << 64) if target >> 63 else target
    return [leaf] + list(hashes[1:])


# Was a hole (found by this round, closed in the working tree as it ran): runners/timing.py digest was a tree of
# _compress(a, b, alpha) = rot32(a + alpha*b) * (2b + 1) modulo 2**64, and _compress is a bijection in its first word
# for a fixed second one, undone by a multiplication by the inverse of (2b + 1), a rotation and a subtraction (so were
# the two folds of the tail). A worker that sent any digest inside the judge's clock picked its per-slot hashes
# afterwards, at reveal, knowing the shown slots: their true hashes there, anything elsewhere, and entry 0 solved down
# the tree's left edge (``_steer_leaf0``) so that the list hashed to the digest sent: no search, at 8192 slots as at
# 12. (The second word is not safe either: given b's low half, the result's low 32 bits are linear in its high half, a
# search of 2**32.) The digest is now a keyed BLAKE2b of the per-slot hashes on the host. Still advised: ask for the
# per-slot file before drawing the shown slots (runners/judge_clock.py _corroborate), so that no entry is ever
# written knowing which slots will be checked.
def test_the_windows_digest_cannot_be_steered_after_the_clock():
    gen = torch.Generator().manual_seed(7)
    key, count = 0x1234_5678_9ABC, 8192
    root = int(digest(torch.randint(-(1 << 62), 1 << 62, (count,), generator=gen), key))  # sent before anything
    shown = sorted(torch.randperm(count, generator=gen)[:16].tolist())
    if 0 in shown:
        shown = shown[1:]
    outputs = {k: torch.randn(4096, generator=gen).half() for k in shown}  # computed after the clock, honestly
    hashes = [0] * count
    for k in shown:
        hashes[k] = commitments([outputs[k]], key)[0]
    steered = torch.tensor(_steer_leaf0(hashes, key, root), dtype=torch.int64)
    assert all(int(steered[k]) == commitments([outputs[k]], key)[0] for k in shown)  # what the judge checks per slot
    assert digest(steered, key) != root  # ... and it hashes to the digest sent before the outputs existed


WINDOW = {"max_slots": 4, "max_window_slots": 12, "reveal_slots": 2}  # 12 slots, 2 shown a round (prefill-like)
ALL_SHOWN = {"max_slots": 4, "max_window_slots": 12, "reveal_slots": 12}


@pytest.fixture(scope="module")
def rms_timed_runs(rms_bundle, tmp_path_factory) -> dict:
    """The window attacks on RMSNorm, one after the other, against one judge of their own on the timed stand-in (T=4,
    H=256, with the residual): the digest forger at a seed whose window never shows slot 0 (the one entry it solves
    for; 16 of 8192 are shown a round on the GPU), and the fill shedder with every slot shown."""
    [seed] = _seeds_whose_reveals_miss(0, 12, 2, 1)
    runs = _timed_judge(rms_bundle, tmp_path_factory.mktemp("timed6"),
                        [(_source(DIGEST), "verify", seed, WINDOW), (_source(FILL), "verify", 3, ALL_SHOWN)],
                        {"T": 4, "H": 256, "residual": True})
    return dict(zip(["digest", "fill"], runs))


@pytest.fixture(scope="module")
def digest_runs(rms_timed_runs) -> dict:
    return rms_timed_runs["digest"]


def test_the_digest_forger_is_right_where_it_is_checked(digest_runs):
    """Control: the cheat gets past correctness and reaches the judge's clock (its kernel is honest); what happens
    there is the test below. Printed (``-s``): the verdict."""
    print("digest forger:", json.dumps(digest_runs)[:600])
    assert digest_runs["stage"] in ("done", "timing"), json.dumps(digest_runs)


# Was a hole (the tree digest above): the cheat's worker runs every other slot in the judge's window, sends an
# arbitrary digest, computes the shown slots at reveal off the clock and steers entry 0 of its file; runners/
# judge_clock.py _window_hashes found the file hashing to the digest, every shown slot matching its hash and the
# oracle, and the claimed 2x was corroborated and credited (1.3-3.8x on this stand-in in four runs).
def test_a_worker_that_steers_its_digest_after_the_clock_is_refused(digest_runs):
    ev = digest_runs
    assert not ev["ok"] and ev["stage"] == "timing" and "committed to" in ev["error"], json.dumps(ev)


def _seed_that_never_shows_slot_0(spec, protocol, candidates=range(1, 200)) -> int:
    """A secret for which the judge's window (runners/judge_clock.py _corroborate, as it draws them) shows slot 0 at
    none of the cases in none of its rounds (the secret is the evaluation's seed)."""
    from runners.judge_clock import TimingSteps
    from runners.protocol import trial_seed

    steps = types.SimpleNamespace(spec=spec, p=protocol)
    steps._per_call_bytes = lambda case: TimingSteps._per_call_bytes(steps, case)
    windows = []
    for index, case in enumerate(spec.cases):
        count = TimingSteps._slot_count(steps, case, protocol.window_us, protocol.window_bytes,
                                        protocol.max_window_slots)
        reveal = min(count, max(2, protocol.max_fetch_bytes // steps._per_call_bytes(case)), protocol.reveal_slots)
        windows.append((index, count, reveal))
    for secret in candidates:
        if not any(0 in torch.randperm(count, generator=torch.Generator().manual_seed(
                trial_seed(secret, 60_000 + r, index)))[:reveal].tolist()
                   for index, count, reveal in windows for r in range(protocol.window_rounds)):
            return secret
    raise AssertionError("no such seed")


@pytest.mark.gpu
@_needs_gpu
def test_gpu_a_worker_that_steers_its_digest_after_the_clock_is_refused(gpu_rms_evaluator):  # noqa: F811
    """The GPU form: a graph of the cheat's own over the even slots replayed in the timed request with an arbitrary
    digest at the cases of 16 MB or less (T=1 and T=512: 8192 and 731 slots), half its sample times reported there,
    entry 0 of its per-slot file steered at every reveal, at a seed whose windows never show slot 0. With the tree
    digest it was predicted ok, those cases credited about 2x; with the BLAKE2b digest it must be refused."""
    from runners.protocol import Protocol

    protocol = getattr(gpu_rms_evaluator, "protocol", None) or Protocol()
    seed = _seed_that_never_shows_slot_0(gpu_rms_evaluator.spec, protocol)
    ev = gpu_rms_evaluator.evaluate(_source(DIGEST), seed=seed, time_it=True, trials=2, static_policy=False)
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), _gpu_summary(ev)
    assert not ev.ok and ev.stage == "timing" and "committed to" in ev.error, _gpu_summary(ev)


# ---- 3. the fill's per-slot scaling is shed: folded into the kernel ---------------------------------------------

def test_a_worker_that_sheds_the_fills_scaling_is_refused(rms_timed_runs):
    """The worker folded half the fill's per-slot scales into its kernel (every shown slot right, the same bits
    as the scaled inputs, while the window's fill was normal_ then mul_). The window's fill is one normal_ with one
    scale per block and round since (runners/inputs.py ``SlotBank.fill``, ``per_slot_scales=False``): nothing is left to
    fold, and a worker that fills otherwise shows wrong slots. Printed with ``-s``."""
    ev = rms_timed_runs["fill"]
    print("fill shedder:", json.dumps(ev)[:600])
    assert ev["stage"] == "timing" and "wrong" in ev["error"], json.dumps(ev)


@pytest.mark.gpu
@_needs_gpu
def test_gpu_a_worker_that_folds_the_fills_scaling_into_its_kernel_earns_nothing(gpu_rms_evaluator):  # noqa: F811
    ev = gpu_rms_evaluator.evaluate(_source(FILL), seed=24, time_it=True, trials=2, static_policy=False)
    prefill = [c for c in ev.cases if c.case.startswith("T=512,")]
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), _gpu_summary(ev)
    assert (not ev.ok and ev.stage == "timing") or all((c.speedup or 0.0) <= 1.1 for c in prefill), _gpu_summary(ev)


# ---- 4. an in-place kernel: the window commits to and shows what it returns, None ---------------------------------

def _load(path):
    spec = importlib.util.spec_from_file_location(f"r6_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fused_add_rms_norm(x, residual, weight, eps):
    s = (x.float() + residual.float()).to(x.dtype)
    y = s.float() * torch.rsqrt(s.float().pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype), s


def test_an_in_place_kernel_that_skips_odd_slots_is_right_outside_them():
    """Control: on dense inputs (the correctness trials) the cheat is SGLang's fused_add_rmsnorm; on an odd slot
    of a slot bank (the timed passes) it writes nothing, and x and residual keep their inputs."""
    from bot.config import load_config, task_spec

    cheat = _load(CHEATS / IN_PLACE)
    gen = torch.Generator().manual_seed(9)
    x, r, w = torch.randn(4, 256, generator=gen), torch.randn(4, 256, generator=gen), torch.rand(256, generator=gen)
    want = _fused_add_rms_norm(x, r, w, 1e-6)
    xc, rc = x.clone(), r.clone()
    cheat.fused_add_rms_norm(xc, rc, w, 1e-6)
    assert torch.allclose(xc, want[0], atol=1e-4) and torch.allclose(rc, want[1], atol=1e-5)
    spec = task_spec("fused_add_rms_norm", load_config(SGLITE).kernels["fused_add_rms_norm"], "interpret")
    case = dataclasses.replace(spec.cases[0], symbols={"T": 4, "H": 256}, dtype="float32")
    bank = SlotBank(spec.args, case, "cpu", 4)
    bank.fill(3)
    before = [{n: t.clone() for n, t in s.items() if isinstance(t, torch.Tensor)} for s in bank.slots]
    for s in bank.slots:
        cheat.fused_add_rms_norm(**s)
    assert torch.equal(bank.slots[1]["x"], before[1]["x"]) and torch.equal(bank.slots[3]["residual"],
                                                                            before[3]["residual"])
    want = _fused_add_rms_norm(before[2]["x"], before[2]["residual"], before[2]["weight"], bank.slots[2]["eps"])
    assert torch.allclose(bank.slots[2]["x"], want[0], atol=1e-4)


@pytest.fixture(scope="module")
def sglite_bundle(tmp_path_factory):
    from bot.config import load_config, task_spec

    from runners.extract import build_bundle

    spec = task_spec("fused_add_rms_norm", load_config(SGLITE).kernels["fused_add_rms_norm"], "interpret")
    bundle = tmp_path_factory.mktemp("sglite-norm")
    build_bundle(SGLITE, spec, bundle)
    return bundle


@pytest.fixture(scope="module")
def in_place_run(sglite_bundle, tmp_path_factory) -> dict:
    [ev] = _timed_judge(sglite_bundle, tmp_path_factory.mktemp("timed6-inplace"),
                        [(_source(IN_PLACE), "verify", 3, {"max_slots": 4, "max_window_slots": 12,
                                                            "reveal_slots": 12})], {"T": 4, "H": 256})
    return ev


def test_the_in_place_skipper_is_right_where_it_is_checked(in_place_run):
    """Control: past correctness (layout and masked trials included) to the judge's clock; printed with ``-s``."""
    print("in-place skipper:", json.dumps(in_place_run)[:600])
    assert in_place_run["stage"] in ("done", "timing"), json.dumps(in_place_run)


# Was a hole (found by this round, closed in the working tree as it ran): runners/timing.py SlotTimer.commit hashed
# self.outputs (what the entry returned), runners/worker.py reveal showed timer.outputs[k], and runners/judge_clock.py
# _corroborate compared those with the oracle's: for an entry that works in place and returns None (sglite's
# fused_add_rms_norm, `written: [x, residual]`) nothing it computed in a timed pass was committed to, shown or checked.
# The cheat skips odd slots of a slot bank (its index from its storage offset) and is the baseline in every checked
# call: the samples and the clock both saw half the work, about 2x, corroborated and credited. The window's result
# per slot is now (returned, *written inputs) (runners/worker.py _with_written, `written` in the bank request).
def test_an_in_place_kernel_that_skips_timed_slots_is_refused(in_place_run):
    ev = in_place_run
    assert not ev["ok"] and ev["stage"] == "timing" and "slot" in ev["error"], json.dumps(ev)


@pytest.fixture(scope="module")
def gpu_sglite_evaluator(tmp_path_factory):
    from bot.config import load_config, task_spec

    from runners.extract import build_bundle
    from runners.sandbox import Evaluator

    spec = task_spec("fused_add_rms_norm", load_config(SGLITE).kernels["fused_add_rms_norm"], "triton")
    bundle = tmp_path_factory.mktemp("gpu-r6-sglite")
    build_bundle(SGLITE, spec, bundle)
    with Evaluator(bundle, "triton", timeout=300, trials=2) as evaluator:
        yield evaluator


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_gpu_an_in_place_kernel_that_skips_timed_slots_is_refused(gpu_sglite_evaluator, protocol):
    """The GPU form: at the T=1 cases (16 KB a call; the window's 8192 slots, the samples' 64) the odd slots launch
    nothing, in the samples' graph and the judge's window alike (the own-kernel share is taken on a one-slot bank,
    where the cheat is the baseline); at T=8192 it is honest. Before the written inputs were part of the window's
    results this was predicted ok, the T=1 cases credited about 1.8-2x."""
    ev = gpu_sglite_evaluator.evaluate(_source(IN_PLACE), seed=23, time_it=True, trials=2, static_policy=False,
                                       protocol=protocol)
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), _gpu_summary(ev)
    assert not ev.ok and ev.stage == "timing" and "slot" in ev.error, _gpu_summary(ev)
