"""Round 8: attacks on what the tolerance lets through (the absolute atol at the judge's own small scales; a float64
output held to the case's float32 tolerance), on the own-kernel share's name rule (a kernel named after the front of
inductor's and the libraries' names), on what the timed calls of a range scalar leave uncharged (work a candidate
does once per new value), and on what the window's commitments leave out (the numbers an entry returns).

As in the earlier rounds (tests/test_judge_attacks*.py): each cheat is in tests/cheats/round8_*.py and runs past the
static policy (the judge must hold on its own); a control shows what it does outside the judge; the judge's verdict
is asserted as a refusal, and where the judge lets it through today the test is ``xfail(strict=True)`` with the
mechanism, what it was credited and the fix in the reason. GPU forms are gpu-marked (skipped without CUDA), their
predictions in the reasons.
"""
from __future__ import annotations

import json

import pytest
import torch
from conftest import CHEATS
from test_judge_attacks_round4 import _gpu_summary, _import, _needs_gpu, _source, gpu_rms_evaluator  # noqa: F401
from test_judge_attacks_round7 import _load, _summary, head_bundle, one_module_bundle  # noqa: F401 (fixture)

from runners.compare import compare_outputs, output_scales
from runners.inputs import SCALE_LOG10
from runners.task import DEFAULT_TOLERANCES

# ---- 1. outputs below the absolute tolerance written as zeros ------------------------------------------------------

_SILU_MUL = '''"""silu(x) * y, row by row."""
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul_kernel(x_ptr, y_ptr, out_ptr, stride_x, stride_y, stride_o, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + row * stride_y + offs, mask=mask, other=0.0).to(tl.float32)
    out = x / (1.0 + tl.exp(-x)) * y
    tl.store(out_ptr + row * stride_o + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def silu_mul(x, y):
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _silu_mul_kernel[(rows,)](x, y, out, x.stride(0), y.stride(0), out.stride(0), n,
                              BLOCK=triton.next_power_of_2(n))
    return out
'''
_SILU_MODULE = "acts/silu_mul.py"
ZEROS = "round8_zeros_below_the_absolute_tolerance.py"


def silu_mul_bundle(dest):
    """A bundle for ``silu_mul(x, y)`` (float16 rows; both inputs vary)."""
    from runners.task import ArgSpec, Case

    return one_module_bundle(dest, _SILU_MODULE, _SILU_MUL, kernel="silu_mul", entry="silu_mul",
                             args=[ArgSpec("x", shape=["T", "H"]), ArgSpec("y", shape=["T", "H"])],
                             cases=[Case(symbols={"T": 4, "H": 64}, dtype="float16")])


@pytest.fixture(scope="module")
def silu_bundle(tmp_path_factory):
    return silu_mul_bundle(tmp_path_factory.mktemp("r8-silu"))


def _baseline_and_cheat(bundle, cheat: str, seed: int, trials: int) -> dict:
    """The baseline and a cheat judged for correctness (untimed) by one evaluator on the interpreter."""
    from runners.sandbox import Evaluator

    with Evaluator(bundle, "interpret", timeout=120, trials=trials) as ev:
        return {"baseline": ev.evaluate(ev.baseline, seed=seed, time_it=False),
                "cheat": ev.evaluate(_source(cheat), seed=seed + 1, time_it=False, static_policy=False)}


@pytest.fixture(scope="module")
def zeros_runs(silu_bundle) -> dict:
    return _baseline_and_cheat(silu_bundle, ZEROS, seed=81, trials=3)


def test_zeros_below_the_atol_are_the_whole_output_at_the_judges_low_scales(silu_bundle):
    """Control, outside the judge: at unit scale the cheat zeroes only outputs near zero; with ``x`` at the low end
    of the judge's own scale range (10^-3, runners/inputs.py SCALE_LOG10) and ``y`` at 10^-1 every output is zero
    while the reference's are not (a relative error of 100 %). Every zeroed element is within float16's absolute
    1e-3, which passed it element by element; the whole output's error against its size (runners/compare.py
    ``_whole_output``) refuses it, and passes the same op rounded from float32 at that scale."""
    base = _load(silu_bundle / "baseline" / _SILU_MODULE, "r8_silu_base")
    cheat = _load(CHEATS / ZEROS, "r8_silu_cheat")
    tol = DEFAULT_TOLERANCES["float16"]
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 64, generator=g), torch.randn(8, 64, generator=g)
    unit_ref, unit_got = base.silu_mul(x.half(), y.half()), cheat.silu_mul(x.half(), y.half())
    assert compare_outputs(unit_got, unit_ref, tol).ok
    assert float((unit_got == 0).float().mean()) < 0.05  # right at unit scale
    small_x, small_y = (x * 10 ** SCALE_LOG10[0]).half(), (y * 0.1).half()  # each input its own factor, as a trial
    ref, got = base.silu_mul(small_x, small_y), cheat.silu_mul(small_x, small_y)
    assert float((ref != 0).float().mean()) > 0.95 and bool((got == 0).all())
    assert float((got.float() - ref.float()).norm() / ref.float().norm()) == 1.0
    assert compare_outputs(got, ref, tol).ok  # each zero is within the absolute 1e-3
    first = output_scales(unit_ref)  # the output's size at the case's first trial, which the judge keeps
    whole = compare_outputs(got, ref, tol, first)
    assert not whole.ok and "whole output" in whole.message
    honest = base.silu_mul(small_x.float(), small_y.float()).half()  # computed in float32, rounded once
    assert compare_outputs(honest, ref, tol, first).ok


# Was a hole (strict xfail until the lead's fix): compare_tensor held every element to `atol + rtol*|ref|` with the
# dtype's atol (float16 1e-3) as an absolute number, while the later trials scale the inputs down to 10^-3: there
# every reference output was below atol and zeros passed. runners/compare.py now also holds the whole output's error
# to 2 max(rtol, eps) of its size (L2), with the dtype's smallest step per element as a floor.
def test_zeros_below_the_atol_are_refused(zeros_runs):
    assert zeros_runs["baseline"].ok, _summary(zeros_runs["baseline"])
    ev = zeros_runs["cheat"]
    assert ev.stage not in ("compile", "crashed", "baseline"), _summary(ev)
    assert not ev.ok and ev.stage == "correctness", _summary(ev)


# ---- 2. a kernel of its own named `triton`: the front of every inductor kernel's name ---------------------------

TRITON_NAMED = "round8_kernel_named_triton.py"


@pytest.fixture(scope="module")
def triton_named_run(rms_evaluator):
    return rms_evaluator.evaluate(_source(TRITON_NAMED), seed=83, time_it=False, trials=2, static_policy=False)


def test_a_kernel_named_triton_is_a_kernel_of_its_own_under_the_front_of_inductors_names(rms_bundle, tmp_path):
    """Control, without a GPU: the cheat's own kernel is recorded as ``triton`` of its package and runs, its RMSNorm
    (torch) is right, and every name inductor gives its kernels, like the names cuBLAS gives its Ampere and Hopper
    GEMMs, is that kernel's name (``triton``; ``ampere``, ``sm90`` for the libraries') followed by ``_`` and a
    lowercase identifier with digits: what the share rule took for Triton's specialisation suffix until this round."""
    import re

    from runners.task import read_task

    cheat = _import(rms_bundle, read_task(rms_bundle).module, _source(TRITON_NAMED), tmp_path)
    fn = cheat.triton.fn  # what runners/launches.py records: (fn.__module__, fn.__name__)
    assert fn.__name__ == "triton" and fn.__module__.startswith(cheat.__package__.split(".")[0] + ".")
    x, w = torch.randn(3, 64), torch.rand(64) + 0.5
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    assert torch.allclose(cheat.rms_norm(x, w), want, atol=1e-5)
    for stem, profiled in (("triton", _INDUCTOR), ("ampere", _AMPERE_GEMM), ("sm90", _HOPPER_GEMM)):
        suffix = profiled[len(stem) + 1:]
        assert profiled.startswith(stem + "_") and re.fullmatch(r"[0-9a-z_]*", suffix) and re.search(r"\d", suffix)


_INDUCTOR = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"
_AMPERE_GEMM = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn"
_HOPPER_GEMM = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"


# Was a hole (found this round, closed as it ran): runners/judge_clock.py borrowed_name refused `triton_poi_`,
# `triton_per_`, ... only, and _same_kernel counted a profiled kernel `<own>_<lowercase identifier with a digit>` as
# the candidate's: a kernel of its own named `triton` was ok on the CPU (the launch record is all there is) and on the
# GPU would have claimed every kernel torch.compile generates (own share ~100 %, a torch-only computation through
# stage `kernel`; an `ampere` or `sm90` kernel, cuBLAS's GEMMs). The suffix must now be Triton's (a digit first, no
# underscore), and the stems of those names are refused as a candidate's kernel names.
def test_a_kernel_named_triton_is_refused(triton_named_run):
    from runners.kernel_share import _share

    ev = triton_named_run
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness"), _summary(ev)
    assert not ev.ok and ev.stage == "kernel", _summary(ev)
    assert _share([(_INDUCTOR, 99.0), ("triton", 1.0)], {"triton"}) == 0.01
    assert _share([(_AMPERE_GEMM, 99.0), ("ampere", 1.0)], {"ampere"}) == 0.01
    assert _share([("_rms_norm_kernel_0d1d2d3de", 99.0), ("aten::mul", 1.0)], {"_rms_norm_kernel"}) == 0.99


# Prediction (H200, not run): with torch.compile on CUDA the profile holds `triton_red_fused_..._0` (inductor's) and
# `triton` (the token); refused at stage `kernel` at the first trial by its name (before the fix: share ~1.0 against
# the baseline's ~1.0, stage `kernel` passed, credited what inductor's kernel gains over the baseline's).
@pytest.mark.gpu
@_needs_gpu
def test_gpu_a_kernel_named_triton_is_refused(gpu_rms_evaluator):  # noqa: F811
    ev = gpu_rms_evaluator.evaluate(_source(TRITON_NAMED), seed=84, time_it=True, trials=2, static_policy=False)
    assert ev.stage not in ("compile", "crashed", "baseline", "correctness"), _gpu_summary(ev)
    assert not ev.ok and ev.stage == "kernel", _gpu_summary(ev)


# ---- 3. tuning at every new value of a range scalar: a cost the judge never times ----------------------------------

TUNES = "round8_tunes_at_every_new_scalar_value.py"
# The timed stand-in's host clock moves by 2-3x between requests on a loaded 2-core machine: a claim it cannot
# corroborate is quarantined at stage `timing` for that alone (and a strict xfail then passes by chance). These two
# attacks are not about the clock's tolerance, so it is wide here; what they are refused for (a cost per new value,
# a number changed after the clock) does not depend on it.
_QUIET = {"corroboration_tolerance": 5.0}


@pytest.fixture(scope="module")
def tunes_run(head_bundle, tmp_path_factory) -> dict:  # noqa: F811
    from test_judge_attacks_round4 import _timed_judge
    from test_judge_attacks_round7 import HEAD_SYMBOLS

    [run] = _timed_judge(head_bundle, tmp_path_factory.mktemp("r8-tunes"),
                         [(_source(TUNES), "verify", 85, {**_QUIET, "max_slots": 2, "max_window_slots": 4,
                                                          "reveal_slots": 4})], HEAD_SYMBOLS)
    return run


def test_the_per_value_tuner_is_slow_at_every_new_value(head_bundle, tmp_path):  # noqa: F811
    """Control, outside the judge (the CPU interpreter, host time): right for every n; at a value it has met before
    no slower than the baseline (what every timed call of the judge is), and at a value it has not met (what a
    caller whose n varies passes) several times slower than the baseline."""
    import time

    from test_judge_attacks_round7 import _HEAD_MODULE

    base = _import(head_bundle, _HEAD_MODULE, None, tmp_path)
    cheat = _import(head_bundle, _HEAD_MODULE, _source(TUNES), tmp_path)
    x = torch.randn(4, 512, generator=torch.Generator().manual_seed(5))
    for n in (1, 7, 200, 512):
        assert torch.equal(cheat.head_max(x, n), base.head_max(x, n))

    def per_call(fn, n, calls=9) -> float:  # the fastest of a few calls: robust to a loaded machine
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn(x, n)
            times.append(time.perf_counter() - t0)
        return min(times)

    def both(n, calls=25) -> tuple[float, float]:
        """The fastest call of each, the two taken in turn, so that a load on the machine meets both alike (a CI
        simulation beside another test run read the tuned cheat 3x the baseline with nine calls each, one after
        the other)."""
        cheat_times, base_times = [], []
        for _ in range(calls):
            cheat_times.append(per_call(cheat.head_max, n, 1))
            base_times.append(per_call(base.head_max, n, 1))
        return min(cheat_times), min(base_times)

    base.head_max(x, 300)
    tuned, plain = both(200)
    assert tuned < 2 * plain  # met before: tuned
    fresh = [301, 333, 377, 411, 457]
    t0 = time.perf_counter()
    for n in fresh:
        cheat.head_max(x, n)
    first = (time.perf_counter() - t0) / len(fresh)
    assert first > 4 * per_call(base.head_max, 300)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "the judge never times a call at a range scalar's value that the candidate has not met: the timed slots' four "
    "values (runners/inputs.py SlotBank, from `7919 + count`, public) are each warmed up before the clock "
    "(runners/timing.py SlotTimer.prepare), and the correctness trials' fresh values are not timed; this head_max "
    "tunes its block size at every new n (~20 calls' worth; a compile or an autotune per value on the GPU) and is "
    "accepted, timed only at its tuned values. Fix: after the correctness trials, a fresh-value probe per case with "
    "a `range:` scalar: both workers called once at K (e.g. 4) values drawn from the secret that no slot or trial "
    "used, each call's wall time by the judge's clock (synchronised, per call); refuse at stage `timing` (or credit "
    "no speedup) when the candidate's median first call exceeds the oracle's by more than a slack for Triton's own "
    "specialisations (e.g. 3x + 1 ms); and draw the window's range values from the window's secret seed"))
def test_tuning_at_every_new_scalar_value_is_refused(tunes_run):
    ev = tunes_run
    assert ev["stage"] not in ("compile", "crashed", "baseline", "correctness", "kernel"), ev
    assert not ev["ok"], json.dumps(ev)


# ---- 4. a float64 output computed in float32 ------------------------------------------------------------------------

_ROW_SUMS = '''"""Each row's sum, accumulated and returned in float64."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_sums_kernel(x_ptr, out_ptr, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < N, other=0.0).to(tl.float64)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def row_sums(x):
    rows, n = x.shape
    out = torch.empty(rows, dtype=torch.float64, device=x.device)
    _row_sums_kernel[(rows,)](x, out, x.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return out
'''
_SUMS_MODULE = "stats/row_sums.py"
SUMS64 = "round8_float64_sum_in_float32.py"


def row_sums_bundle(dest):
    """A bundle for ``row_sums(x)`` (float32 rows in, a float64 sum per row out)."""
    from runners.task import ArgSpec, Case

    return one_module_bundle(dest, _SUMS_MODULE, _ROW_SUMS, kernel="row_sums", entry="row_sums",
                             args=[ArgSpec("x", shape=["T", "H"])],
                             cases=[Case(symbols={"T": 6, "H": 256}, dtype="float32")])


@pytest.fixture(scope="module")
def sums_bundle(tmp_path_factory):
    return row_sums_bundle(tmp_path_factory.mktemp("r8-sums"))


@pytest.fixture(scope="module")
def sums_runs(sums_bundle) -> dict:
    return _baseline_and_cheat(sums_bundle, SUMS64, seed=86, trials=2)


def test_a_float64_sum_in_float32_carries_float32s_error(sums_bundle):
    """Control, outside the judge: the baseline's float64 sums are exact to float64 (against torch's), the cheat's
    off by ~1e-7 of their value: far past any float64 tolerance, within float32's, which the judge applied to a
    float64 output of a float32 case until this round (DEFAULT_TOLERANCES had no float64)."""
    from runners.task import Tolerance

    base = _load(sums_bundle / "baseline" / _SUMS_MODULE, "r8_sums_base")
    cheat = _load(CHEATS / SUMS64, "r8_sums_cheat")
    x = torch.randn(6, 256, generator=torch.Generator().manual_seed(4)) * 10
    want = x.double().sum(-1)
    ref, got = base.row_sums(x), cheat.row_sums(x)
    assert ref.dtype == got.dtype == torch.float64
    assert float(((ref - want).abs() / want.abs()).max()) < 1e-14
    assert float(((got - want).abs() / want.abs()).max()) > 1e-9
    assert compare_outputs(got, ref, DEFAULT_TOLERANCES["float32"]).ok
    assert not compare_outputs(got, ref, Tolerance(atol=1e-12, rtol=1e-12)).ok


# Was a hole (found this round, closed as it ran): runners/task.py TaskSpec.tolerances_for gave a dtype that neither the
# config nor DEFAULT_TOLERANCES names the case's tolerance, so a float64 output of a float32 case was held to float32's
# 1e-5 (of a float16 case to float16's 4e-3): this row_sums, summing in float32 and casting to float64 (relative error
# ~1e-7), was ok. DEFAULT_TOLERANCES has float64 now. (Still open, smaller: another dtype without a tolerance of its
# own, a float8 output say, takes the case's; an unknown floating dtype should take the known dtype nearest its
# torch.finfo(dtype).eps at or below it, never one looser than its precision.)
def test_a_float64_sum_in_float32_is_refused(sums_runs):
    assert sums_runs["baseline"].ok, _summary(sums_runs["baseline"])
    ev = sums_runs["cheat"]
    assert ev.stage not in ("compile", "crashed", "baseline"), _summary(ev)
    assert not ev.ok and ev.stage == "correctness", _summary(ev)


# ---- 5. numbers outside the window's commitments ------------------------------------------------------------------

_CLIP_COUNT = '''"""Clip to [-bound, bound], and say how many elements were clipped."""
import torch
import triton
import triton.language as tl


@triton.jit
def _clip_kernel(x_ptr, y_ptr, count_ptr, N, bound, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.minimum(tl.maximum(x, -bound), bound), mask=mask)
    clipped = tl.where(mask & (tl.abs(x) > bound), 1, 0)
    tl.atomic_add(count_ptr, tl.sum(clipped, axis=0))


def clip_count(x, bound):
    y = torch.empty_like(x)
    counter = torch.zeros(1, dtype=torch.int32, device=x.device)
    n = x.numel()
    _clip_kernel[(triton.cdiv(n, 1024),)](x, y, counter, n, bound, BLOCK=1024)
    return y, int(counter.item())
'''
_CLIP_MODULE = "ops/clip_count.py"
CLIP_SYMBOLS = {"N": 4096}
NUMBERS = "round8_numbers_outside_the_commitment.py"


def clip_count_bundle(dest):
    """A bundle for ``clip_count(x, bound)`` (a float32 vector, ``bound`` fixed at 1.5): a tensor and an int out."""
    from runners.task import ArgSpec, Case

    return one_module_bundle(dest, _CLIP_MODULE, _CLIP_COUNT, kernel="clip_count", entry="clip_count",
                             args=[ArgSpec("x", shape=["N"]), ArgSpec("bound", value=1.5)],
                             cases=[Case(symbols=dict(CLIP_SYMBOLS), dtype="float32")])


@pytest.fixture(scope="module")
def clip_bundle(tmp_path_factory):
    return clip_count_bundle(tmp_path_factory.mktemp("r8-clip"))


@pytest.fixture(scope="module")
def numbers_run(clip_bundle, tmp_path_factory) -> dict:
    from test_judge_attacks_round4 import _timed_judge

    [run] = _timed_judge(clip_bundle, tmp_path_factory.mktemp("r8-numbers"),
                         [(_source(NUMBERS), "verify", 89, {**_QUIET, "max_slots": 2, "max_window_slots": 4,
                                                            "reveal_slots": 4})], CLIP_SYMBOLS)
    return run


def test_the_count_is_made_up_in_timed_requests(clip_bundle):
    """Control, outside the judge: the cheat is right when called plainly; in a timed request it returns 0 for the
    count (wrong: the baseline's is in the hundreds) and skips the counting. (Until this round the window's commitment
    of a slot, runners/protocol.py ``commitment_of``, was the same for the made-up count as for the right one.)"""
    base = _load(clip_bundle / "baseline" / _CLIP_MODULE, "r8_clip_base")
    cheat = _load(CHEATS / NUMBERS, "r8_clip_cheat")
    x = torch.randn(4096, generator=torch.Generator().manual_seed(6))
    y_ref, n_ref = base.clip_count(x, 1.5)
    y, n = cheat.clip_count(x, 1.5)
    assert torch.equal(y, y_ref) and n == n_ref > 100
    cheat._state["timed"] = True
    try:
        y_timed, n_timed = cheat.clip_count(x, 1.5)
    finally:
        cheat._state["timed"] = False
    assert torch.equal(y_timed, y_ref) and n_timed == 0


# Was a hole (found this round, closed as it ran): the window's commitments (CommitPlan) covered a slot's tensor
# outputs only ('what is not a tensor is left out'), and the judge compared the shown slots' numbers with the oracle's
# after the clock. This clip_count returned 0 for its count in every timed request (skipping the count, and on the
# GPU its synchronisation) and recomputed it for the shown slots by wrapping the worker's `reveal` (the request table,
# a local of Server.serve): ok on the timed stand-in, credited 1.0-2.3x in four runs. Every non-tensor output is
# folded into the slot's commitment now (runners/commitments.py ``_leaf_word``).
def test_numbers_made_up_in_the_timed_pass_are_refused(numbers_run):
    from runners.protocol import commitment_of

    ev = numbers_run  # the oracle ran the baseline throughout: a judge that could not time it says `baseline`
    assert ev["stage"] not in ("compile", "crashed", "baseline", "correctness", "kernel"), json.dumps(ev)
    assert not ev["ok"] and ev["stage"] == "timing", json.dumps(ev)
    y = torch.zeros(8)
    assert commitment_of((y, 0), 12345) != commitment_of((y, 17), 12345)
