"""Attacks on the judge, sixteenth round: the checkpoints between the calls of the judge's window's pass
(runners/checkpoints.py: after an eighth of the calls, drawn in secret, a trace of the call's outputs and a link into
the next call's input), through them and around them.

Unit-level on ``Checkpoints`` (a bank of runners/inputs.py SlotBank, passes made as runners/timing.py makes them, two
workers' traces held to each other by ``traces_wrong``), and through the judge on the timed CPU stand-in
(tests/test_judge_attacks_round4.py ``_timed_judge``: every judge step the real one, the host clock for CUDA events):
RMSNorm's bundle, and a bundle of this file's own, ``five_parts(alpha, x, w)``, whose first floating-point input is a
one-element scale and which returns five outputs. Holes the judge lets through today are ``xfail(strict=True)`` with
the mechanism, what was credited and the fix in the reason; what holds, or was closed this round in
runners/checkpoints.py, is asserted plainly (with what it was credited before in the docstring). The GPU forms are at
the end (predictions, unrun).
"""
from __future__ import annotations

import json
from collections import namedtuple

import pytest
import torch
from conftest import CHEATS
from test_checkpoints import ARGS, CASE, TOL, _bank, _filled, _pass
from test_judge_attacks_round4 import _needs_gpu, _source, _timed_judge, gpu_rms_evaluator  # noqa: F401 (fixture)
from test_judge_attacks_round7 import one_module_bundle

from runners import checkpoints
from runners.checkpoints import FOREIGN, Checkpoints
from runners.inputs import SlotBank
from runners.task import ArgSpec, Case, Tolerance
from runners.wire import WireError

# ---- 1. nothing of the candidate's runs inside a checkpoint --------------------------------------------------------
# Round 16 found the checkpoint calling the candidate's code: ``t.detach()``, ``t.numel()`` and ``torch.take(t, ...)``
# on an output that is a torch.Tensor subclass go through its ``__torch_function__``, which can launch the calls it left
# pending right then (the cheat of section 2), and so can a TorchFunctionMode or a Python dispatch mode entered at
# import, or a tuple subclass's ``__iter__`` (``compare.flatten`` iterates). ``Checkpoints.after`` now reads the result
# through the base types' own slots, marks a tensor subclass as FOREIGN without touching it, and runs with
# ``__torch_function__`` and Python dispatch modes off.

_RAN: list = []  # what of the candidate's ran (each test clears it)


class _Watching(torch.Tensor):
    """An output that notes every torch function on it (where a batcher would launch its pending calls)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _RAN.append(getattr(func, "__name__", str(func)))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class _Listening(tuple):
    """A result whose iteration is the candidate's."""

    def __iter__(self):
        _RAN.append("__iter__")
        return super().__iter__()

    def __getitem__(self, i):
        _RAN.append("__getitem__")
        return super().__getitem__(i)


class _Posing:
    """Not a tensor, but says it is one when asked its class."""

    @property
    def __class__(self):
        _RAN.append("__class__")
        return torch.Tensor


def _scaled(x, w, ids):
    return x * w, ids + 1


def test_a_tensor_subclass_output_is_not_read_and_is_refused_where_the_baselines_is_plain():
    bank = _bank()
    checks = Checkpoints(bank.slots, [1, 4, 9], 8, "x")
    _RAN.clear()
    _pass(bank, checks, lambda x, w, ids: ((x * w).as_subclass(_Watching), ids + 1))
    assert _RAN == []  # no detach, numel or take reached it
    layout = checks.layout()
    assert [r[2] for r in layout if r[1] == 0] == [FOREIGN] * 3 and len(checks.traces()) == 1  # the int64 one
    ref_bank = _bank()
    ref = Checkpoints(ref_bank.slots, [1, 4, 9], 8, "x")
    _pass(ref_bank, ref, _scaled)
    why = checkpoints.traces_wrong({"at": checks.at}, (checks.traces(), layout), (ref.traces(), ref.layout()), TOL)
    assert "output 0 of call 1" in why and "torch.Tensor subclass" in why, why


def test_a_container_subclass_and_a_posing_leaf_run_nothing_and_trace_as_the_plain_result():
    bank, ref_bank = _bank(), _bank()
    checks, ref = Checkpoints(bank.slots, [1, 4, 9], 8, "x"), Checkpoints(ref_bank.slots, [1, 4, 9], 8, "x")
    _RAN.clear()
    _pass(bank, checks, lambda x, w, ids: _Listening((x * w, _Posing(), ids + 1)))
    assert _RAN == []
    _pass(ref_bank, ref, lambda x, w, ids: (x * w, 0.5, ids + 1))
    assert checks.layout() == ref.layout()
    assert checkpoints.traces_wrong({"at": checks.at}, (checks.traces(), checks.layout()),
                                    (ref.traces(), ref.layout()), TOL) == ""


def test_no_torch_function_or_dispatch_mode_of_the_candidates_runs_in_a_checkpoint():
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            _RAN.append(("function", getattr(func, "__name__", str(func))))
            return func(*args, **(kwargs or {}))

    class Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            _RAN.append(("dispatch", str(func)))
            return func(*args, **(kwargs or {}))

    bank = _bank()
    checks = Checkpoints(bank.slots, [1, 4, 9], 8, ["x", "w"])
    outs = [_scaled(**s) for s in bank.slots]
    _RAN.clear()
    with Functions(), Dispatch():  # entered at the candidate's import, they would stay for the whole pass
        torch.zeros(1).add_(1)
        assert _RAN  # they are on
        _RAN.clear()
        for k in range(len(bank.slots)):
            checks.after(k, outs[k])
    assert _RAN == []


def test_torch_take_patched_after_the_judge_imported_its_checkpoints_is_not_theirs(monkeypatch):
    """The worker imports runners/checkpoints.py before any candidate code, which binds torch's take and put_ then:
    a later ``torch.take = ...`` (the candidate's, at its import) is not what a checkpoint calls. (Overriding torch's
    kernel itself, ``torch.library``, is: section 2's open hole.)"""
    monkeypatch.setattr(torch, "take", lambda *a, **k: _RAN.append("take"))
    monkeypatch.setattr(torch.Tensor, "put_", lambda *a, **k: _RAN.append("put_"))
    bank = _bank()
    checks = Checkpoints(bank.slots, [1, 4], 8, "x")
    _RAN.clear()
    _pass(bank, checks)
    assert _RAN == [] and checks.traces()[0].abs().sum() > 0


# ---- 2. through the judge: a batcher that launches its pending calls when a checkpoint reads its outputs -----------

GROUP = 3  # calls per launch in the timed passes (12 slots a pass): batches the samples' clock and the judge's agree on
TWELVE = {"max_slots": 12, "max_window_slots": 12, "reveal_slots": 12}
# A control whose subject is not the clock leaves the clock's verdict out (as tests/test_commitments.py's): on two busy
# cores the stand-in's clock, two counted rounds, once read the five-part baseline against itself at 0.49x in CI (one
# oracle round at half the others' pass); the clock's own controls are tests/test_corroboration.py's
CLOCK_ASIDE = {"corroboration_tolerance": 10.0}


@pytest.fixture(scope="module")
def rms_runs(rms_bundle, tmp_path_factory) -> dict:
    """The batchers of this section, one after the other, against one judge on the timed stand-in (one decode-like
    case, eps fixed as in round 4)."""
    subclass = _source("round16_flushes_when_its_output_is_read.py", GROUP=str(GROUP))
    override = _source("round16_overrides_take_to_flush.py", GROUP=str(GROUP))
    runs = _timed_judge(rms_bundle, tmp_path_factory.mktemp("r16-rms"),
                        [(subclass, "verify", 5, TWELVE), (override, "verify", 5, TWELVE),
                         (override, "search", 6, TWELVE)], {"T": 1, "H": 64}, {"eps": 1e-6})
    return {"subclass": runs[0], "override": dict(zip(["verify", "search"], runs[1:]))}


def test_a_batcher_that_launches_when_its_output_is_read_is_refused(rms_runs):
    """(Was a hole, found this round: accepted under the full protocol, credited 1.37x on the stand-in, seed 5, with the
    honest copy at 0.98x.) Round 4's deferred-work batcher whose outputs are a torch.Tensor subclass: the checkpoint's
    ``detach``/``take`` on an output ran its ``__torch_function__``, which launched the pending calls right before the
    trace read them; between checkpoints the calls were batched. Closed: a checkpoint never reads a subclass, and the
    judge refuses one where the baseline's output is a plain tensor."""
    ev = rms_runs["subclass"]
    assert not ev["ok"] and ev["stage"] == "timing", json.dumps(ev)
    assert "torch.Tensor subclass" in ev["error"] and "checkpoints" in ev["error"], ev["error"]


@pytest.mark.xfail(strict=True, reason=(
    "runners/checkpoints.py Checkpoints.after: the checkpoints run in the candidate's process, and their trace is a "
    "call of torch's `aten::take.out`, which the candidate can override at import (`torch.library.Library('aten', "
    "'IMPL').impl('take.out', ...)` for CPU and CUDA): its kernel launches the calls it left pending and then does the"
    " take, so every trace reads written outputs and between two checkpoints the calls are batched (round 4's batcher,"
    " groups of 3, cut at every checkpoint). Binding torch.take at import and turning __torch_function__ and dispatch "
    "modes off (this round) do not reach a kernel registered in torch's dispatcher. Seen on the stand-in: every trace "
    "right in every run; credited 1.73x under the full protocol (seed 7) and 1.60x under the search's (seed 6) where "
    "the stand-in's clock agreed with the claim, quarantined by its noise in other runs (its clock read 0.74-1.10x "
    "there; the honest copy, groups of 1, read 0.98-1.22x). On the GPU (prediction) at 8192 slots with at most 256 "
    "checkpoints the groups can be about 32 calls. Fix (the class, not this form): the candidate must not know which "
    "calls are checkpointed while it can still act: a checkpoint after EVERY call, each gated by a flag the judge's "
    "seed sets on the device inside the clock (a trace and a link of 0 values where the flag is off), so that an "
    "override or a patch sees a take after every call and flushing at each is no batching at all (a device-side branch"
    " on the flag, a kernel or a graph's conditional node a call, is what batching saved); its cost, measured alone on"
    " the oracle, is taken off as now. Cheaper detection (is `aten::take.out` a Python kernel: "
    "torch._C._dispatch_dump) is a check the candidate's process can patch too."))
@pytest.mark.parametrize("protocol", ["verify", "search"])
def test_a_batcher_that_overrides_torchs_take_is_refused(rms_runs, protocol):
    ev = rms_runs["override"][protocol]
    assert ev["protocol"] == protocol, ev
    assert not ev["ok"] and "checkpoints" in ev["error"], json.dumps(ev)


# ---- 3 and 4. a bundle of its own: a one-element first input, and five outputs -------------------------------------
FIVE_MODULE = "ops/five_parts.py"
FIVE = '''"""Five outputs of one row-wise pass: four elementwise parts of x and w, and an RMS norm of x scaled by alpha."""
import torch
import triton
import triton.language as tl


@triton.jit
def _parts_kernel(x_ptr, w_ptr, y0_ptr, y1_ptr, y2_ptr, y3_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=0.0)
    w = tl.load(w_ptr + offs, mask=m, other=0.0)
    tl.store(y0_ptr + row * N + offs, x * w, mask=m)
    tl.store(y1_ptr + row * N + offs, x + w, mask=m)
    tl.store(y2_ptr + row * N + offs, x - w, mask=m)
    tl.store(y3_ptr + row * N + offs, x * x, mask=m)


@triton.jit
def _norm_kernel(alpha_ptr, x_ptr, w_ptr, y4_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=0.0)
    w = tl.load(w_ptr + offs, mask=m, other=0.0)
    a = tl.load(alpha_ptr)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + 1e-6)
    tl.store(y4_ptr + row * N + offs, x * rstd * w * a, mask=m)


def five_parts(alpha, x, w):
    x = x.contiguous()
    T, N = x.shape
    ys = [torch.empty_like(x) for _ in range(5)]
    block = triton.next_power_of_2(N)
    _parts_kernel[(T,)](x, w, ys[0], ys[1], ys[2], ys[3], N, BLOCK=block)
    _norm_kernel[(T,)](alpha, x, w, ys[4], N, BLOCK=block)
    return tuple(ys)
'''
FIVE_ARGS = [ArgSpec("alpha", shape=[1], dist="uniform", low=0.5, high=2.0, vary=False),
             ArgSpec("x", shape=["T", "H"]), ArgSpec("w", shape=["H"])]
FIVE_SYMBOLS = {"T": 2, "H": 64}


@pytest.fixture(scope="module")
def five_runs(tmp_path_factory) -> dict:
    bundle = one_module_bundle(tmp_path_factory.mktemp("r16-five"), FIVE_MODULE, FIVE, kernel="five_parts",
                               entry="five_parts", args=FIVE_ARGS,
                               cases=[Case(symbols=dict(FIVE_SYMBOLS), dtype="float32")])
    runs = _timed_judge(bundle, tmp_path_factory.mktemp("r16-five-timed"),
                        [(FIVE, "verify", 5, {**TWELVE, **CLOCK_ASIDE}),
                         (_source("round16_computes_ahead_past_a_one_value_link.py", GROUP="3"), "verify", 5, TWELVE),
                         (_source("round16_defers_its_fifth_output.py", GROUP="6"), "verify", 6, TWELVE)],
                        FIVE_SYMBOLS)
    return dict(zip(["baseline", "ahead", "fifth"], runs))


def test_the_five_part_baseline_passes_against_itself(five_runs):
    """Control: an entry with a one-element first input and five outputs, its every input linked and every output
    traced, is accepted (its own kernels against themselves)."""
    ev = five_runs["baseline"]
    assert ev["ok"] and ev["stage"] == "done", json.dumps(ev)


def test_work_done_ahead_past_a_link_into_a_one_element_input_is_refused(five_runs):
    """(Was a hole, found this round: accepted, credited 3.68x on the stand-in under the full protocol (groups of 3,
    seed 5) and 2.55x under the search's (groups of 2); with groups of 4 the samples' 5.2x was quarantined against
    the clock's 3.0x.) The judge linked one input, the first floating-point one the entry does not write: here
    ``alpha``, a one-element scale, so every value a link wrote was the one already there and the cheat that computes
    a group's outputs at its first call from the later slots' inputs (round 4's, turned round) was right everywhere.
    Closed: every floating-point input the entry does not write is linked (runners/checkpoints.py ``draw``)."""
    ev = five_runs["ahead"]
    assert not ev["ok"] and ev["stage"] == "timing" and "wrong" in ev["error"], json.dumps(ev)


def test_work_deferred_for_an_output_past_the_fourth_is_refused(five_runs):
    """(Was a hole, found this round: accepted, credited 1.64x on the stand-in, groups of 6, seed 6.) A checkpoint
    traced the first 4 tensor outputs of a call; the cheat writes those at its call and leaves the fifth (the second
    kernel's) to one launch per group of 6. Closed: the first 16 places of the flattened result are traced (an entry's
    written inputs come after what it returns, so they count too)."""
    ev = five_runs["fifth"]
    assert not ev["ok"] and ev["stage"] == "timing", json.dumps(ev)
    assert "output 4 of call" in ev["error"] and "read right after that call" in ev["error"], ev["error"]


def test_the_judge_links_every_float_input_the_entry_does_not_write():
    from runners.protocol import Protocol
    from runners.task import TaskSpec

    spec = TaskSpec.__new__(TaskSpec)
    spec.args, spec.written = FIVE_ARGS, []
    case = Case(symbols=dict(FIVE_SYMBOLS), dtype="float32")
    assert checkpoints.draw(spec, case, 12, Protocol(), seed=1)["link"] == ["alpha", "x", "w"]
    bank = SlotBank(FIVE_ARGS, case, "cpu", 6, per_slot_scales=False)
    bank.fill(1)
    checks = Checkpoints(bank.slots, [0, 2], 8, ["alpha", "x", "w"])
    _pass(bank, checks, lambda alpha, x, w: x * alpha)
    _filled(bank, checks, 4)
    fresh = {name: bank.slots[1][name].clone() for name in ("alpha", "x", "w")}
    _pass(bank, checks, lambda alpha, x, w: x * alpha)
    assert torch.equal(bank.slots[1]["alpha"], fresh["alpha"])  # one element: a link writes what is there
    assert not torch.equal(bank.slots[1]["x"], fresh["x"]) and not torch.equal(bank.slots[1]["w"], fresh["w"])


# ---- 5. honest entries the checkpoints must not refuse --------------------------------------------------------------

RANGED = [ArgSpec("x", shape=["T", "H"]), ArgSpec("ids", shape=["T"], dtype="int64", low=0, high=9),
          ArgSpec("n", range=[0, 3])]


def _agree(oracle, candidate, args=ARGS, case=CASE, at=(0, 1, 2, 3, 5, 8), count: int = 10) -> str:
    """Both functions through a worker's checkpoints on the same bank and seeds (a first pass, a fill, a pass: as a
    window's rounds), every float input linked; why the candidate's traces are refused ('' if they are not)."""
    links = [a.name for a in args if a.is_tensor and getattr(torch, a.dtype or case.dtype).is_floating_point]
    seen = []
    for fn in (oracle, candidate):
        bank = SlotBank(args, case, "cpu", count, per_slot_scales=False)
        bank.fill(1)
        checks = Checkpoints(bank.slots, list(at), 8, links)
        _pass(bank, checks, fn)
        _filled(bank, checks, 9)
        _pass(bank, checks, fn)
        seen.append(([t.clone() for t in checks.traces()], checks.layout()))
    return checkpoints.traces_wrong({"at": list(at)}, seen[1], seen[0], TOL)


def test_an_output_that_is_a_tensor_in_some_slots_and_none_in_others_is_traced_without_a_crash():
    """(Was a false refusal, found this round.) A place of the result held a tensor at some calls and None at others
    (a range scalar's value decides; runners/commitments.py hashes such a place as ``each``): traces were indexed by
    tensors counted, so the int64 output stood at place 0 where the float one was None, and ``torch.take`` into the
    float buffer raised (``take(): self and out expected to have the same dtype``): the oracle's window could not be
    prepared, and the case was refused at stage 'baseline' for any candidate. Places of the result are traced now."""
    def fn(x, ids, n):
        return (x * n if n else None, ids + n)

    assert _agree(fn, fn, RANGED, Case(symbols={"T": 3, "H": 40}, dtype="float32")) == ""


def test_an_output_whose_dtype_follows_a_range_scalar_is_not_traced_where_it_differs():
    def fn(x, ids, n):
        return (x * 2 if n % 2 else ids + n,)

    assert _agree(fn, fn, RANGED, Case(symbols={"T": 3, "H": 40}, dtype="float32")) == ""


_Pair = namedtuple("_Pair", "y ids")


@pytest.mark.parametrize("candidate", [
    pytest.param(lambda x, w, ids: [x * w, ids + 1], id="a-list-for-a-tuple"),
    pytest.param(lambda x, w, ids: _Pair(x * w, ids + 1), id="a-namedtuple"),
    pytest.param(lambda x, w, ids: ((x * w).t().contiguous().t(), ids + 1), id="a-transposed-layout"),
    pytest.param(lambda x, w, ids: ((x.t() * w[:, None]).t(), ids + 1), id="a-non-contiguous-view"),
    pytest.param(lambda x, w, ids: (torch.empty_like(x).copy_(x * w), (ids + 1).to(torch.int32).long()),
                 id="written-into-buffers-of-its-own"),
])
def test_honest_candidates_laid_out_otherwise_pass_the_checkpoints(candidate):
    assert _agree(_scaled, candidate) == ""


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x, w, ids: {"b": ids > 4, "a": x * w}, id="a-dict-with-a-bool-output"),
    pytest.param(lambda x, w, ids: (x, ids), id="outputs-that-are-its-inputs"),
    pytest.param(lambda x, w, ids: (x * 1.0, 2.5, None), id="a-number-and-none"),
    pytest.param(lambda x, w, ids: (x[:0] * w, ids.sum()), id="an-empty-output-and-a-0-d-one"),
    pytest.param(lambda x, w, ids: ids * 2, id="ignores-its-linked-inputs"),
])
def test_honest_entries_of_every_kind_pass_against_themselves(fn):
    assert _agree(fn, fn) == ""


@pytest.mark.parametrize("forged", [
    {"checkpoints": "x", "checkpoint_layout": []},
    {"checkpoints": {"kind": "seq", "items": []}, "checkpoint_layout": {"0": 1}},
    {"checkpoints": {"kind": "seq", "items": []}, "checkpoint_layout": [[1, 0, True]]},
    {"checkpoints": {"kind": "seq", "items": []}, "checkpoint_layout": [[1, 0, 2.5]]},
    {"checkpoints": {"kind": "seq", "items": []}, "checkpoint_layout": [["1", 0, 3]]},
    {"checkpoints": {"kind": "seq", "items": []}, "checkpoint_layout": [[[1], 0, 3]]},
])
def test_forged_checkpoint_replies_are_wire_errors(forged):
    def decode(meta, most):
        if not isinstance(meta, dict):
            raise WireError("bad value header")
        return [torch.zeros(3, 8)] if meta.get("items") is not None else meta

    with pytest.raises(WireError):
        checkpoints.read_traces(forged, decode)


def test_forged_traces_that_read_are_refused_not_a_crash():
    """Whatever a hostile worker sends that reads as a list of 2-D tensors with a list of int rows, the judge answers
    with a reason (never an exception): another number of traces, other rows, other forms, a row of another length, a
    FOREIGN row where the baseline's is plain, values out of tolerance."""
    bank = _bank()
    checks = Checkpoints(bank.slots, [1, 4, 9], 8, "x")
    _pass(bank, checks)
    _filled(bank, checks, 3)
    _pass(bank, checks)
    ref = ([t.clone() for t in checks.traces()], checks.layout())
    at = {"at": checks.at}
    (floats, ints), layout = ref
    assert checkpoints.traces_wrong(at, ref, ref, TOL) == ""
    forged = [([floats], layout), ([floats, ints, ints], layout), ([floats, ints], layout[:-1]),
              ([floats, ints], layout + [[9, 2, 1]]), ([floats, ints], [r + [0] for r in layout]),
              ([floats, ints], [r[:2] for r in layout]), ([floats, ints], [[r[0], r[1], FOREIGN] for r in layout]),
              ([floats[:2], ints], layout), ([floats.T.contiguous(), ints], layout),
              ([floats.half(), ints], layout), ([floats.bool(), ints], layout), ([ints, floats], layout),
              ([floats + 1, ints], layout), ([floats, ints + 1], layout), ([floats * float("nan"), ints], layout),
              ([torch.zeros(3, 0), ints], layout), ([], [])]
    for got in forged:
        assert checkpoints.traces_wrong(at, got, ref, Tolerance(atol=1e-5, rtol=1e-5)) != "", got[1]


# ---- 6. the GPU forms (run on the H200: `python -m pytest -m gpu tests/test_judge_attacks_round16.py`) --------------
# Predictions made without a GPU, from the judge's code and the CPU runs above (round 4's evaluator fixture).


@pytest.mark.gpu
@_needs_gpu
def test_gpu_a_batcher_that_launches_when_its_output_is_read_is_refused(gpu_rms_evaluator):  # noqa: F811
    """Refused at the first decode case. The prediction was the stand-in's reason (the layout's FOREIGN rows: a
    ``torch.Tensor`` subclass). On the H200 (session 14) the cheat's own worker failed first, while the window was
    captured with the checkpoints: an illegal memory access in its process (its grouped launch addresses slots the
    window's bank does not lay out as it assumes), refused as the candidate's ("the judge's window could not be
    prepared"). Either way the candidate's, at stage timing, and nothing credited."""
    ev = gpu_rms_evaluator.evaluate(_source("round16_flushes_when_its_output_is_read.py", GROUP="8"), seed=31,
                                    time_it=True, trials=2, static_policy=False, protocol="verify")
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), (ev.stage, ev.error[:400])
    assert not ev.ok and ev.stage == "timing" and ("torch.Tensor subclass" in ev.error or "the judge's window could "
                                                   "not be prepared" in ev.error), (ev.stage, ev.error[:400])


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.xfail(strict=True, reason=(
    "prediction (H200): as on the stand-in (section 2). The override of `aten::take.out` for CUDA runs at capture, "
    "so the graph holds each group's launch right before the checkpoint's take; at the decode cases (8192 slots, 256 "
    "checkpoints) groups of 8 are cut about once in four, about 3-5x fewer launches than the baseline's: expected "
    "accepted with a few-x credit (quarantined if the samples' claim runs past the clock by more than its "
    "tolerance). Fix: as in section 2"))
def test_gpu_a_batcher_that_overrides_torchs_take_is_refused(gpu_rms_evaluator):  # noqa: F811
    ev = gpu_rms_evaluator.evaluate(_source("round16_overrides_take_to_flush.py", GROUP="8"), seed=32, time_it=True,
                                    trials=2, static_policy=False, protocol="verify")
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), (ev.stage, ev.error[:400])
    assert not ev.ok and "checkpoints" in ev.error, (ev.stage, ev.error[:400])


def test_the_cheats_of_this_round_are_where_the_tests_read_them():
    for name in ("round16_flushes_when_its_output_is_read.py", "round16_overrides_take_to_flush.py",
                 "round16_computes_ahead_past_a_one_value_link.py", "round16_defers_its_fifth_output.py"):
        assert "@GROUP@" in (CHEATS / name).read_text()
