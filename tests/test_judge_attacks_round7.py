"""Round 7: attacks on what the judge compares (each output's tolerance, the outputs' kinds and structure), on what
its timed calls are checked against (the window's values), and on what the pause of the candidate's worker leaves
running (work already queued on the device).

As in the earlier rounds (tests/test_judge_attacks*.py): each cheat is in tests/cheats/round7_*.py and runs past the
static policy (the judge must hold on its own); a control shows what it does outside the judge; the judge's verdict
is asserted as a refusal, and where the judge lets it through today the test is ``xfail(strict=True)`` with the
mechanism, what it was credited and the fix in the reason; holes the lead closed while this round ran are plain tests
with the hole described above each. Bundles of their own are written here (an RMSNorm forward that returns a dict
with a float32 rstd beside half-precision rows; a head-max with a range scalar) as round 4's dispatch bundle is. GPU
forms are gpu-marked (skipped without CUDA), their predictions in the reasons.
"""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from conftest import CHEATS
from test_judge_attacks_round4 import _gpu_summary, _needs_gpu, _source, gpu_rms_evaluator  # noqa: F401

from runners.compare import compare_outputs
from runners.task import DEFAULT_TOLERANCES

# ---- bundles of their own --------------------------------------------------------------------------------------

# An RMSNorm forward that returns what a backward pass needs: the normalised rows (the case's dtype) and each row's
# rstd in float32, as Liger's and Unsloth's forwards do.
_RSTD_BASELINE = '''"""RMSNorm forward with its float32 rstd per row."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_x, stride_y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd)


def rms_norm_fwd(x, weight, eps=1e-6):
    rows, n = x.shape
    y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    _rms_fwd_kernel[(rows,)](x, weight, y, rstd, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
    return @RETURN@
'''
_MODULE = "norms/rms_fwd.py"


def one_module_bundle(dest, module: str, source: str, **spec):
    """A bundle of one baseline module (``source`` at ``module`` under baseline/) for the task ``spec`` (TaskSpec's
    fields but the module and its files): the bundles of their own of rounds 7 and 8."""
    from runners.task import TaskSpec, write_task

    (dest / "baseline" / module).parent.mkdir(parents=True, exist_ok=True)
    (dest / "baseline" / module).write_text(source)
    write_task(dest, TaskSpec(module=module, files=[module], **spec))
    return dest


def norm_bundle(dest, returns: str = '{"y": y, "rstd": rstd}'):
    """A bundle for ``rms_norm_fwd`` (float16 cases; ``returns``: the baseline's return expression)."""
    from runners.task import ArgSpec, Case

    return one_module_bundle(dest, _MODULE, _RSTD_BASELINE.replace("@RETURN@", returns), kernel="rms_norm_fwd",
                             entry="rms_norm_fwd",
                             args=[ArgSpec("x", shape=["T", "H"]), ArgSpec("weight", shape=["H"], vary=False),
                                   ArgSpec("eps", value=1e-6)],
                             cases=[Case(symbols={"T": 5, "H": 64}, dtype="float16"),
                                    Case(symbols={"T": 3, "H": 128}, dtype="float16")])


def _load(path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _summary(ev) -> str:
    return json.dumps({"stage": ev.stage, "ok": ev.ok, "error": (ev.error or "")[:400],
                       "cases": [(c.case, c.err_ratio, c.max_abs_err) for c in ev.cases]})


# ---- 1. a float32 output held to the case's float16 tolerance ----------------------------------------------------

RSTD = "round7_rstd_at_half_precision.py"


@pytest.fixture(scope="module")
def rstd_runs(tmp_path_factory) -> dict:
    """Sections 1 and 2, one judge on one bundle (its baseline returns ``{"y": ..., "rstd": ...}``)."""
    from runners.sandbox import Evaluator

    bundle = norm_bundle(tmp_path_factory.mktemp("r7-norm"))
    with Evaluator(bundle, "interpret", timeout=120, trials=1) as ev:
        return {"bundle": bundle, "baseline": ev.evaluate(ev.baseline, seed=71, time_it=False),
                "cheat": ev.evaluate(_source(RSTD), seed=72, time_it=False, static_policy=False),
                "dict": ev.evaluate(_source(DICT), seed=73, time_it=False, static_policy=False)}


def test_a_half_precision_rstd_is_wrong_at_float32(rstd_runs):
    """Control, outside the judge: on the judge's own kind of inputs (a later trial's scale, a near-zero row and a
    wide row), the cheat's normalised rows are the baseline's, and its float32 rstd is off by up to ~5e-4 of its
    value: far past float32's tolerance (atol = rtol = 1e-5), within float16's (1e-3, 4e-3), which the judge
    applies to it. The baseline passes its own judge on this bundle."""
    assert rstd_runs["baseline"].ok, rstd_runs["baseline"].error
    assert rstd_runs["cheat"].stage in ("done", "correctness"), _summary(rstd_runs["cheat"])  # the cheat ran
    base = _load(rstd_runs["bundle"] / "baseline" / _MODULE, "r7_rstd_base")
    cheat = _load(CHEATS / RSTD, "r7_rstd_cheat")
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(6, 64, generator=g) * 3.0)
    x[0] *= 1e-4
    x[-1] *= 10 ** (torch.rand(64, generator=g) * 3.5 - 2)
    x, w = x.half(), torch.randn(64, generator=g).half()
    want, got = base.rms_norm_fwd(x, w), cheat.rms_norm_fwd(x, w)
    (y_ref, r_ref), (y, r) = (want["y"], want["rstd"]), (got["y"], got["rstd"])
    assert r.dtype == r_ref.dtype == torch.float32 and torch.equal(y, y_ref)
    assert compare_outputs([y, r], [y_ref, r_ref], DEFAULT_TOLERANCES["float16"]).ok
    at_fp32 = compare_outputs(r, r_ref, DEFAULT_TOLERANCES["float32"])
    assert not at_fp32.ok and at_fp32.err_ratio > 5, at_fp32
    assert float(((r - r_ref).abs() / r_ref.abs()).max()) > 1e-4


# Was a hole (found this round, closed in the working tree as it ran, commit c489477): runners/judge.py check_case,
# _variant_trial and runners/judge_clock.py _corroborate compared every output with spec.tolerance(case.dtype), the
# CASE's dtype, so a float32 output of a float16 case (an rstd, a LayerNorm's mean, a float32 loss or router weight
# beside half-precision activations; bfloat16 cases looser still) was held to float16's tolerance, 400x float32's
# rtol: this rstd kept to 11 bits was accepted, ok under both protocols (err_ratio 0.07 at float16's tolerance, 13
# at float32's). Each output is now held to its own dtype's (TaskSpec.tolerances_for). Still open, a corner: an
# output whose dtype has no tolerance of its own (float64) falls back to the case's.
def test_a_half_precision_rstd_is_refused(rstd_runs):
    ev = rstd_runs["cheat"]
    assert not ev.ok and ev.stage == "correctness" and "output 0" in ev.error and "atol 1e-05" in ev.error, \
        _summary(ev)  # output 0: the rstd, the dict's first key


# ---- 2. an output of a kind the wire does not know: compared as two equal marker strings -------------------------

DICT = "round7_dict_of_zeros.py"


@pytest.fixture(scope="module")
def dict_run(rstd_runs) -> dict:
    return {"bundle": rstd_runs["bundle"], "cheat": rstd_runs["dict"]}


def test_a_dict_of_zeros_is_wrong(dict_run):
    """Control, outside the judge: the baseline's dict holds the normalised rows and their rstd, the cheat's zeros;
    what the wire makes of either (runners/wire.py encode_value, decode_value) was one and the same marker string
    before the fix, and is the dict itself now, whose items compare."""
    import tempfile
    from pathlib import Path

    from runners.wire import decode_value, encode_value

    assert dict_run["cheat"].stage in ("done", "correctness"), _summary(dict_run["cheat"])  # the cheat ran
    base = _load(dict_run["bundle"] / "baseline" / _MODULE, "r7_dict_base")
    cheat = _load(CHEATS / DICT, "r7_dict_cheat")
    x, w = torch.randn(4, 64).half(), torch.randn(64).half()
    want, got = base.rms_norm_fwd(x, w), cheat.rms_norm_fwd(x, w)
    assert not torch.allclose(want["y"].float(), got["y"].float(), atol=1e-2) and not torch.equal(want["rstd"],
                                                                                                  got["rstd"])
    with tempfile.TemporaryDirectory() as folder:
        seen = [decode_value(encode_value(Path(folder), name, v), Path(folder), 1 << 20)
                for name, v in (("want", want), ("got", got))]
    assert all(isinstance(v, dict) and sorted(v) == ["rstd", "y"] for v in seen)  # carried as dicts now
    assert not compare_outputs(seen[1], seen[0], DEFAULT_TOLERANCES["float16"]).ok


# Was a hole (found this round, closed as it ran, commit c489477): runners/wire.py encode_value encoded a value that
# was not a tensor, a tuple/list, None or a bool/int/float as {'kind': 'other'}, decode_value turned it into the
# marker string '<unsupported output type NAME>' on both sides, and compare_outputs found the two strings equal: for
# an entry whose baseline returns a dict (a dataclass, a str) nothing was compared, and this candidate's zeros were
# accepted, ok. Dicts (string keys) and short strings now cross the wire and are compared item by item; any other
# kind in the oracle's reply stops the evaluation at stage 'baseline'.
def test_a_dict_of_zeros_is_refused(dict_run):
    ev = dict_run["cheat"]
    assert not ev.ok and ev.stage == "correctness" and "out of tolerance" in ev.error, _summary(ev)


# ---- 3. the right values in another structure -----------------------------------------------------------------

TUPLE = "round7_tuple_for_a_tensor.py"


@pytest.fixture(scope="module")
def tuple_run(rms_evaluator):
    return rms_evaluator.evaluate(_source(TUPLE), seed=74, time_it=False, trials=1, static_policy=False)


def test_a_tuple_for_a_tensor_breaks_its_callers(rms_bundle, tmp_path):
    """Control, outside the judge: the cheat's values are the baseline's, in a structure no caller of the baseline
    can use (``y + 1`` on a 1-tuple raises; ``out, res = ...`` unpacks a tuple as ``out``)."""
    from test_judge_attacks_round4 import _import

    from runners.task import read_task

    module = read_task(rms_bundle).module
    base = _import(rms_bundle, module, None, tmp_path)
    cheat = _import(rms_bundle, module, _source(TUPLE), tmp_path)
    x, w, r = torch.randn(3, 64).half(), torch.randn(64).half(), torch.randn(3, 64).half()
    got, want = cheat.rms_norm(x, w), base.rms_norm(x, w)
    assert isinstance(got, tuple) and torch.allclose(got[0].float(), want.float(), atol=1e-3)
    with pytest.raises(TypeError):
        got + 1
    out, res = cheat.rms_norm(x, w, residual=r)
    assert isinstance(out, tuple) and not isinstance(base.rms_norm(x, w, residual=r)[0], tuple)


# Was a hole (found this round, closed as it ran, commit c489477): runners/judge.py _candidate_call held the flat
# tensor_layouts of the reply against the oracle's, and compare_outputs compared flatten()-ed lists: the nesting was
# never compared, so `(out,)` for `out` and `((out,), res)` for `(out, res)` were accepted, ok, though every caller
# breaks. The encoded structure (runners/wire.py structure) is now compared first.
def test_a_tuple_for_a_tensor_is_refused(tuple_run):
    ev = tuple_run
    assert not ev.ok and ev.stage == "correctness" and "where the baseline returns" in ev.error, _summary(ev)


# ---- 4. the timed calls are checked on easy values only -----------------------------------------------------------

EASY = "round7_timed_path_right_only_on_the_windows_values.py"
SOFTMAX_WINDOW = {"max_slots": 2, "max_window_slots": 4, "reveal_slots": 4}  # every slot of the window shown
SOFTMAX_SYMBOLS = {"M": 4, "N": 64}


@pytest.fixture(scope="module")
def softmax_bundle(tmp_path_factory):
    from bot.config import load_config, task_spec
    from conftest import EXAMPLE

    from runners.extract import build_bundle

    spec = task_spec("softmax", load_config(EXAMPLE).kernels["softmax"], "interpret")
    bundle = tmp_path_factory.mktemp("r7-softmax")
    build_bundle(EXAMPLE, spec, bundle)
    return bundle


def _window_peaks(bundle, secret: int, symbols: dict, count: int = 8) -> list[float]:
    """The largest |value| of the judge's window fill in each of its three rounds, for one case at index 0 (the
    secret is the evaluation's seed), as runners/judge_clock.py _corroborate fills it."""
    import dataclasses

    from runners.inputs import SlotBank
    from runners.protocol import trial_seed
    from runners.task import read_task

    spec = read_task(bundle)
    bank = SlotBank(spec.args, dataclasses.replace(spec.cases[0], symbols=symbols), "cpu", count,
                    per_slot_scales=False)
    peaks = []
    for r in range(3):
        bank.fill(trial_seed(secret, 50_000 + r, 0))
        peaks.append(max(float(b.float().abs().max()) for b in bank.blocks.values()))
    return peaks


@pytest.fixture(scope="module")
def easy_run(softmax_bundle, tmp_path_factory) -> dict:
    from test_judge_attacks_round4 import _timed_judge

    # a fixed secret: the rate at which a secret leaves every window value under 80 (where the cheat's one-pass
    # kernel does not overflow) is the test below; this run is the judge's verdict at one of the others
    [run] = _timed_judge(softmax_bundle, tmp_path_factory.mktemp("r7-easy"),
                         [(_source(EASY), "verify", 7, SOFTMAX_WINDOW)], SOFTMAX_SYMBOLS)
    return run


def test_the_windows_values_are_easy_at_few_secrets(softmax_bundle):
    """How often the judge's whole window stays under 80 (the cheat's timed path is then right everywhere it is
    shown), over 200 secrets at three shapes of 4 slots: 76, 64 and 76 of 200 with one scale a round (the hard rows
    at the block's scale); a handful since each slot's hard rows take a scale of their own."""
    for symbols in ({"M": 4, "N": 64}, {"M": 6, "N": 200}, {"M": 1, "N": 64}):
        easy = sum(max(_window_peaks(softmax_bundle, s, symbols, 4)) < 80 for s in range(1, 201))
        assert easy <= 12, (symbols, easy)


def test_the_timed_path_is_wrong_on_the_judges_own_trial_values(softmax_bundle, tmp_path):
    """Control, outside the judge: on the values of a later correctness trial (a scale of 10, a wide row, as
    runners/inputs.py make_inputs draws them) laid out as a caller's slice (a dense view into a larger buffer, as a
    slot is), the cheat's softmax is inf/NaN where the baseline's is a distribution; on the same values owning
    their storage (how every correctness trial sends them) it is the baseline's. On the window's values (one
    scale, plain normal) the timed path is right."""
    from test_judge_attacks_round4 import _import

    from runners.inputs import make_inputs
    from runners.task import read_task

    spec = read_task(softmax_bundle)
    base = _import(softmax_bundle, spec.module, None, tmp_path)
    cheat = _import(softmax_bundle, spec.module, _source(EASY), tmp_path)
    drawn = (make_inputs(spec.args, spec.cases[0], "cpu", seed=s, trial=1)["x"] for s in range(400))
    x = next(x for x in drawn if float(x.float().abs().max()) > 100)  # a trial-1 draw of the judge's own: wide row
    want = base.softmax(x)
    assert torch.isfinite(want.float()).all() and torch.allclose(want.float().sum(-1), torch.ones(x.shape[0]),
                                                                 atol=2e-2)
    start = 128 * (-(-x.numel() // 128))  # 256-byte aligned, as a fresh allocation (and a slot) is
    wide = torch.empty(4 * start, dtype=x.dtype)
    view = wide[start:start + x.numel()].view(x.shape)  # a dense slice of a larger buffer (row 1 of 4)
    view.copy_(x)
    assert not torch.isfinite(cheat.softmax(view).float()).all()
    assert torch.allclose(cheat.softmax(x.clone()).float(), want.float(), atol=1e-3)
    block = torch.randn(4 * start, generator=torch.Generator().manual_seed(1)).half() * 8
    slot = block[start:start + x.numel()].view(x.shape)
    assert torch.allclose(cheat.softmax(slot).float(), base.softmax(slot.clone()).float(), atol=1e-3)


# Found this round, closed in the working tree as it ran: runners/inputs.py SlotBank.fill gave every timed call (the
# samples and the judge's window) plain normal values, one scale per block and round, no near-zero or wide row, while
# the hard values of check_case, _check_layout and _check_masked reached only the untimed calls, and a call told the
# two apart from its input's storage. This softmax ran a one-pass kernel without the max in every timed call and the
# baseline's kernel in every checked one: ok under both protocols on the stand-in, every window slot shown and right
# (credited 1.3-1.4x by the stand-in's host clock). The window's fill then gave every slot the trials' hard rows
# (SlotBank._structured_rows), at the round's one scale: the cheat still passed at 64-76 of 200 secrets; each slot's
# hard rows have a scale of their own since (4911098), and the window is as hard as the trials.
def test_a_timed_path_right_only_on_the_windows_values_is_refused(easy_run):
    ev = easy_run
    assert ev["stage"] not in ("compile", "crashed", "baseline", "kernel"), json.dumps(ev)  # the cheat ran
    assert not ev["ok"] and ev["stage"] == "timing" and "wrong" in ev["error"], json.dumps(ev)


# ---- 5. work queued on the device before the candidate's pause (GPU) ----------------------------------------------

QUEUES = "round7_queues_device_work_before_its_pause.py"


def test_the_device_work_queuer_is_honest_without_a_gpu(rms_evaluator):
    """Control: without CUDA its worker's channel is left alone and the kernel is an honest rewrite (ok); on the
    GPU it only adds device work queued after each of its replies."""
    ev = rms_evaluator.evaluate(_source(QUEUES), seed=75, time_it=False, trials=1, static_policy=False)
    assert ev.ok, _summary(ev)


@pytest.mark.gpu
@_needs_gpu
@pytest.mark.parametrize("protocol", ["verify", "search"])
# Was a prediction (strict xfail): SIGSTOP stops the candidate's host threads, not the device work it queued before
# the pause, so the oracle's samples would be slowed and the candidate credited 1.3-2x. On the H200 (2026-12-01,
# bench/results/evaluator-h200/session8/) it earned no credit under either protocol: the test passed as written.
def test_gpu_device_work_queued_before_the_pause_earns_no_credit(gpu_rms_evaluator, protocol):  # noqa: F811
    ev = gpu_rms_evaluator.evaluate(_source(QUEUES), seed=25, time_it=True, trials=2, static_policy=False,
                                    protocol=protocol)
    print(_gpu_summary(ev))  # which way it was denied: refused at timing, or timed at parity
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness", "kernel"), _gpu_summary(ev)
    assert (not ev.ok and ev.stage == "timing") or all((c.speedup or 0.0) <= 1.10 for c in ev.cases), \
        _gpu_summary(ev)


# ---- 6. Triton kernels of its own named after the kernels torch ran (GPU) -----------------------------------------

NAMED = "round7_kernel_named_after_inductors.py"


def test_a_kernel_of_its_own_can_carry_an_inductor_kernels_name(rms_bundle, tmp_path):
    """Control, without a GPU: the cheat makes a ``@triton.jit`` kernel of its own package under any identifier
    (here one inductor gives its RMSNorm kernels), which the launch hook records as the candidate's
    (``module:name``) and which runs; and the judge's share rule (runners/kernel_share.py ``_share``) counts a
    profiled kernel of that name as the candidate's own: on a profile where inductor's kernel does all the work
    and the token launch costs 1 %, the own share is 1.0."""
    from test_judge_attacks_round4 import _import

    from runners.kernel_share import _share
    from runners.task import read_task

    cheat = _import(rms_bundle, read_task(rms_bundle).module, _source(NAMED), tmp_path)
    name = "triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0"
    kernel = cheat._named(name)
    fn = kernel.fn  # what runners/launches.py records: (fn.__module__, fn.__name__)
    assert fn.__name__ == name and fn.__module__.startswith(cheat.__package__.split(".")[0] + ".")
    scratch = torch.ones(1)
    kernel[(1,)](scratch)
    assert float(scratch) == 1.0
    x, w = torch.randn(3, 64), torch.rand(64) + 0.5
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    assert torch.allclose(cheat.rms_norm(x, w), want, atol=1e-5)
    profile = [(name, 99.0), (name, 1.0), ("void at::native::vectorized_elementwise_kernel<4>(...)", 0.0)]
    assert _share(profile, {name}) == 1.0


# Was a prediction (H200, not run): runners/judge_clock.py own_kernel_share counts a profiled kernel as the candidate's
# when its name is one the candidate launched, and this cheat computes RMSNorm with torch.compile and launches
# one-element kernels of its own under the names inductor gave its kernels (triton_per_fused_...): its own share would
# be about 1.0 and stage 'kernel' would pass. Candidate kernels may not take inductor's or the vendor libraries' names
# since (runners/judge_clock.py borrowed_name, checked at the first trial: tests/test_kernel_names.py); not yet run on
# the GPU.
@pytest.mark.gpu
@_needs_gpu
def test_gpu_kernels_named_after_inductors_are_refused(gpu_rms_evaluator):  # noqa: F811
    ev = gpu_rms_evaluator.evaluate(_source(NAMED), seed=26, time_it=True, trials=2, static_policy=False)
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness"), _gpu_summary(ev)
    assert not ev.ok and ev.stage == "kernel", _gpu_summary(ev)


# ---- 7. a scalar's range: the timed calls pass its low end only -------------------------------------------------

LOW_END = "round7_fast_only_at_the_scalars_low_end.py"
_HEAD_MAX = '''"""The maximum of the first n columns of each row."""
import torch
import triton
import triton.language as tl


@triton.jit
def _head_max_kernel(x_ptr, out_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + offs, mask=offs < n, other=-float("inf")).to(tl.float32)
        best = tl.maximum(best, x)
    tl.store(out_ptr + row, tl.max(best, axis=0))


def head_max(x, n):
    rows, width = x.shape
    out = torch.empty(rows, dtype=torch.float32, device=x.device)
    _head_max_kernel[(rows,)](x, out, x.stride(0), n, BLOCK=triton.next_power_of_2(width))
    return out
'''
_HEAD_MODULE = "reductions/head_max.py"
HEAD_SYMBOLS = {"T": 4, "H": 512}


def head_max_bundle(dest):
    """A bundle for ``head_max(x, n)``, ``n`` declared with ``range: [1, 512]`` (float32 rows of 512)."""
    from runners.task import ArgSpec, Case

    return one_module_bundle(dest, _HEAD_MODULE, _HEAD_MAX, kernel="head_max", entry="head_max",
                             args=[ArgSpec("x", shape=["T", "H"]), ArgSpec("n", range=[1, HEAD_SYMBOLS["H"]])],
                             cases=[Case(symbols=dict(HEAD_SYMBOLS), dtype="float32")])


@pytest.fixture(scope="module")
def head_bundle(tmp_path_factory):
    return head_max_bundle(tmp_path_factory.mktemp("r7-head"))


@pytest.fixture(scope="module")
def low_end_run(head_bundle, tmp_path_factory) -> dict:
    from test_judge_attacks_round4 import _timed_judge

    [run] = _timed_judge(head_bundle, tmp_path_factory.mktemp("r7-low"),
                         [(_source(LOW_END), "verify", 27, {"max_slots": 2, "max_window_slots": 4,
                                                             "reveal_slots": 4})], HEAD_SYMBOLS)
    return run


def _per_call_s(fn, *args, calls: int = 3) -> float:
    import time

    fn(*args)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - t0) / calls


def test_the_low_end_specialist_is_slow_over_the_rest_of_the_range(head_bundle, tmp_path):
    """Control, outside the judge (the CPU interpreter, host time): right for every n; at n = 512 (the top of the
    declared range) several times slower than the baseline, at n = 1 (where every timed call is) not slower."""
    from test_judge_attacks_round4 import _import

    base = _import(head_bundle, _HEAD_MODULE, None, tmp_path)
    cheat = _import(head_bundle, _HEAD_MODULE, _source(LOW_END), tmp_path)
    x = torch.randn(4, 512, generator=torch.Generator().manual_seed(5))
    for n in (1, 7, 200, 512):
        assert torch.equal(cheat.head_max(x, n), base.head_max(x, n))
    assert _per_call_s(cheat.head_max, x, 512) > 4 * _per_call_s(base.head_max, x, 512)
    assert _per_call_s(cheat.head_max, x, 1) < 1.5 * _per_call_s(base.head_max, x, 1)


# Was a hole (found this round, closed as it ran, 82e895b): runners/inputs.py SlotBank gave every timed slot (the
# samples and the judge's window) a range scalar's low end, as trial 0 does; check_case drew it across the range only
# in the untimed trials. This kernel, tuned for the low end (a one-load special case at n = 1, blocks of 16 columns
# elsewhere: several times slower than the baseline at n = 512, the control), was timed only at n = 1: ok, credited
# 4.5x by the stand-in's host clock (judge's clock ratio 1.05). A bank's slots now take four values in turn, the
# range's two ends and two draws (from a generator seeded by the slot count: the same values in every evaluation,
# which this cheat does not need to know).
def test_a_kernel_fast_only_at_the_scalars_low_end_earns_no_credit(low_end_run):
    ev = low_end_run
    assert ev["stage"] not in ("compile", "crashed", "baseline", "correctness", "kernel"), json.dumps(ev)
    assert not ev["ok"] or max(ev["speedups"]) < 0.5, json.dumps(ev)


# ---- 8. an in-place entry that writes nothing in place -------------------------------------------------------------

OUT_OF_PLACE = "round7_in_place_out_of_place.py"


@pytest.fixture(scope="module")
def out_of_place_run(tmp_path_factory) -> dict:
    from bot.config import load_config, task_spec
    from conftest import ROOT

    from runners.extract import build_bundle
    from runners.sandbox import Evaluator

    sglite = ROOT / "examples" / "sglite"
    spec = task_spec("fused_add_rms_norm", load_config(sglite).kernels["fused_add_rms_norm"], "interpret")
    bundle = tmp_path_factory.mktemp("r7-sglite")
    build_bundle(sglite, spec, bundle)
    with Evaluator(bundle, "interpret", timeout=120, trials=1) as ev:
        return {"bundle": bundle, "spec": spec,
                "cheat": ev.evaluate(_source(OUT_OF_PLACE), seed=76, time_it=False, static_policy=False)}


def test_the_out_of_place_kernel_leaves_its_callers_tensors_stale(out_of_place_run):
    """Control, outside the judge: called as the model calls it, the cheat leaves ``x`` and ``residual`` as they
    were (the baseline updates both); what it computed reaches only a dict that holds them, as the worker's does."""
    cheat = _load(CHEATS / OUT_OF_PLACE, "r7_out_of_place")
    g = torch.Generator().manual_seed(6)
    x, r, w = torch.randn(4, 256, generator=g), torch.randn(4, 256, generator=g), torch.rand(256, generator=g) + 0.5
    x0, r0 = x.clone(), r.clone()
    s = x0 + r0
    want_x = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    cheat.fused_add_rms_norm(x, r, w, 1e-6)
    assert torch.equal(x, x0) and torch.equal(r, r0)  # the caller's tensors: untouched
    kwargs = {"x": x, "residual": r, "weight": w, "eps": 1e-6}
    cheat.fused_add_rms_norm(**kwargs)
    assert torch.allclose(kwargs["x"], want_x, atol=1e-4) and torch.allclose(kwargs["residual"], s, atol=1e-6)
    assert out_of_place_run["cheat"].stage in ("done", "correctness"), _summary(out_of_place_run["cheat"])


@pytest.mark.xfail(strict=True, reason=(
    "runners/worker.py call encodes `written` from its own `kwargs` dict after the call, and runners/timing.py's "
    "window (runners/worker.py _with_written) from the slot dict: both are the candidate's process's, and the "
    "entry replaces the dict's x and residual with the new tensors it computed out of place (sys._getframe), "
    "leaving the caller's inputs unwritten. The judge compares those new tensors with the oracle's written inputs: "
    "right, ok. Fix (as for the converse, tests/test_judge_attacks.py hidden input modification): the judge reads "
    "every input back itself after the call, written or not, from memory the candidate cannot swap (on the CPU the "
    "exchange files mapped by the worker; on CUDA device buffers the judge allocates and shares by IPC, read by the "
    "judge after the call), and compares the written ones with the oracle's, the others with what it sent"))
def test_an_in_place_entry_that_writes_nothing_in_place_is_refused(out_of_place_run):
    ev = out_of_place_run["cheat"]
    assert not ev.ok and ev.stage == "correctness", _summary(ev)


# ---- 9. one-row inputs never get a wide row ------------------------------------------------------------------------

DECODE = "round7_unsafe_decode_path.py"


@pytest.fixture(scope="module")
def row_runs(softmax_bundle, tmp_path_factory) -> dict:
    """Sections 9-11, one judge: the softmax at a decode case (one row of 200) and at six rows of 200, under the
    full protocol with three trials (the bot's verification runs trials + 2)."""
    import shutil

    import yaml

    from runners.sandbox import Evaluator

    bundle = tmp_path_factory.mktemp("r7-rows") / "bundle"
    shutil.copytree(softmax_bundle, bundle)
    task = yaml.safe_load((bundle / "task.yaml").read_text())
    task["cases"] = [{**task["cases"][0], "symbols": {"M": 1, "N": 200}},
                     {**task["cases"][0], "symbols": {"M": 6, "N": 200}}]
    (bundle / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    with Evaluator(bundle, "interpret", timeout=120, trials=3) as ev:
        return {"decode": ev.evaluate(_source(DECODE), seed=81, time_it=False, static_policy=False),
                "positions": ev.evaluate(_source(POSITIONS), seed=84, time_it=False, static_policy=False),
                "masks": ev.evaluate(_source(MASKS), seed=85, time_it=False, static_policy=False)}


def test_the_decode_path_is_wrong_on_a_row_of_large_range(softmax_bundle, tmp_path):
    """Control, outside the judge: on one row whose values span what a multi-row trial's wide row holds (a scale of
    10, per-column factors up to 10**1.5), the cheat's softmax is NaN where the baseline's is a distribution; on two
    rows it is the baseline's."""
    from test_judge_attacks_round4 import _import

    from runners.task import read_task

    spec = read_task(softmax_bundle)
    base = _import(softmax_bundle, spec.module, None, tmp_path)
    cheat = _import(softmax_bundle, spec.module, _source(DECODE), tmp_path)
    g = torch.Generator().manual_seed(8)
    row = (torch.randn(1, 200, generator=g) * 10 * 10 ** (torch.rand(200, generator=g) * 3.5 - 2)).half()
    assert float(row.float().max()) > 100
    want = base.softmax(row).float()
    assert torch.isfinite(want).all() and abs(float(want.sum()) - 1) < 1e-2
    assert not torch.isfinite(cheat.softmax(row).float()).all()
    two = torch.cat([row, row])
    assert torch.allclose(cheat.softmax(two).float(), base.softmax(two).float(), atol=1e-3)


# Was a hole (found this round, closed as it ran, 6551bdb): runners/inputs.py make_tensor gave a later
# trial's tensor its near-zero row and its wide row only when t.dim() >= 2 and t.shape[0] >= 2, and the window's
# SlotBank._structured_rows likewise: a one-row input (the decode case, T = 1) and a 1-D one got plain normal values at
# one scale per trial. This softmax without its max on one row was accepted at 12 of 12 secrets (81-92) under the full
# protocol. A one-row tensor now gets a wide segment (half of it) in later trials, a one-row slot one in the window.
# Residual: refused at 10 of 12 of those secrets now (83 and 84 pass: the segment's values stay under ~88 in every
# trial when the trials' scales are drawn low; the same one-scale coin flip as section 4).
def test_an_unsafe_decode_path_is_refused(row_runs):
    ev = row_runs["decode"]
    assert ev.stage in ("done", "correctness"), _summary(ev)  # the cheat ran
    assert not ev.ok and ev.stage == "correctness", _summary(ev)


# ---- 10. the hard rows are always the first and the last ----------------------------------------------------------

POSITIONS = "round7_safe_only_on_the_first_and_last_rows.py"


def test_safe_only_on_the_first_and_last_rows_is_wrong_on_a_middle_row(softmax_bundle, tmp_path):
    """Control, outside the judge: a wide row (as a later trial's) put in the middle of six rows is NaN from the
    cheat, a distribution from the baseline; at the last row, where the judge put it until b262994, the cheat is
    right. The judge's trials now draw its row: one wide row a trial, not always the last (trials 1-8)."""
    from test_judge_attacks_round4 import _import

    from runners.inputs import make_inputs
    from runners.task import read_task

    spec = read_task(softmax_bundle)
    base = _import(softmax_bundle, spec.module, None, tmp_path)
    cheat = _import(softmax_bundle, spec.module, _source(POSITIONS), tmp_path)
    g = torch.Generator().manual_seed(9)
    x = torch.randn(6, 200, generator=g)
    wide = torch.randn(200, generator=g) * 10 * 10 ** (torch.rand(200, generator=g) * 3.5 - 2)
    assert float(wide.max()) > 100
    last, middle = x.clone(), x.clone()
    last[-1], middle[2] = wide, wide
    last, middle = last.half(), middle.half()
    assert torch.allclose(cheat.softmax(last).float(), base.softmax(last).float(), atol=1e-3)
    assert torch.isfinite(base.softmax(middle).float()).all()
    assert not torch.isfinite(cheat.softmax(middle).float()).all()
    rows = {int(make_inputs(spec.args, spec.cases[0], "cpu", seed=11 + t, trial=t)["x"].float().abs().amax(-1).argmax())
            for t in range(1, 9)}
    assert len(rows) >= 2


# Was a hole (found this round, closed as it ran: b262994, then 7006d3e): make_tensor put a later trial's near-zero
# row at row 0 and its wide row at the last row, always, and the window's SlotBank._structured_rows the same; this
# softmax, safe on the first and last rows only, was accepted at 12 of 12 secrets (84-95). With the rows drawn but one
# wide row a trial (b262994) it still passed at 9 of 16 (84-99); about half of a later trial's rows are wide now,
# each with its own factors (7006d3e).
def test_safe_only_on_the_first_and_last_rows_is_refused(row_runs):
    ev = row_runs["positions"]
    assert ev.stage in ("done", "correctness"), _summary(ev)  # the cheat ran
    assert not ev.ok and ev.stage == "correctness", _summary(ev)


# ---- 11. the masked trial's rows are fixed -----------------------------------------------------------------------

MASKS = "round7_inf_guard_only_where_the_judge_masks.py"


def test_the_guard_only_on_the_masked_trials_rows_is_wrong_on_row_four(softmax_bundle, tmp_path):
    """Control, outside the judge: a masked prefix of 150 of 200 at row 0 (where the masked trial put it until
    7006d3e) is right from the cheat; at row 4 it is NaN, where the baseline gives a distribution over the other 50."""
    from test_judge_attacks_round4 import _import

    from runners.task import read_task

    spec = read_task(softmax_bundle)
    base = _import(softmax_bundle, spec.module, None, tmp_path)
    cheat = _import(softmax_bundle, spec.module, _source(MASKS), tmp_path)
    x = torch.randn(6, 200, generator=torch.Generator().manual_seed(10)).half()
    x[0, :150] = float("-inf")
    assert torch.allclose(cheat.softmax(x).float(), base.softmax(x).float(), atol=1e-3)
    x[4, :150] = float("-inf")
    want = base.softmax(x).float()
    assert torch.isfinite(want).all() and abs(float(want[4].sum()) - 1) < 1e-2
    assert torch.isnan(cheat.softmax(x).float()[4]).all()


# Was a hole (found this round, closed as it ran, 7006d3e): runners/inputs.py masked_rows put its patterns at fixed
# rows (a masked prefix at row 0, a suffix at row 1, a middle run at row 2, random holes at row 3). A one-pass
# softmax needs its -inf guard only on a masked prefix, always row 0: this one, guarded on rows 0-3 only, was
# accepted at 8 of 8 secrets (85-92) under the full protocol, NaN on a masked prefix at any other row of a batch. The
# patterns sit at rows drawn per trial now, two of each.
def test_the_guard_only_on_the_masked_trials_rows_is_refused(row_runs):
    ev = row_runs["masks"]
    assert ev.stage in ("done", "correctness"), _summary(ev)  # the cheat ran
    assert not ev.ok and ev.stage == "correctness", _summary(ev)
