"""Round 7: attacks on what the judge compares (each output's tolerance, the outputs' kinds and structure), on what
its timed calls are checked against (the window's values), and on what the pause of the candidate's worker leaves
running (work already queued on the device).

As in the earlier rounds (tests/test_judge_attacks*.py): each cheat is in tests/cheats/round7_*.py and runs past the
static policy (the judge must hold on its own); a control shows what it does outside the judge; the judge's verdict
is asserted as a refusal, and where the judge lets it through today the test is ``xfail(strict=True)`` with the
mechanism, what it was credited and the fix in the reason. Bundles of their own are written here (a baseline that
returns a float32 output beside half-precision ones; one that returns a dict) as round 4's dispatch bundle is. GPU
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


def norm_bundle(dest, returns: str = "y, rstd"):
    """A bundle for ``rms_norm_fwd`` (float16 cases; ``returns``: the baseline's return expression)."""
    from runners.task import ArgSpec, Case, TaskSpec, write_task

    (dest / "baseline" / "norms").mkdir(parents=True)
    (dest / "baseline" / _MODULE).write_text(_RSTD_BASELINE.replace("@RETURN@", returns))
    spec = TaskSpec(kernel="rms_norm_fwd", module=_MODULE, entry="rms_norm_fwd", files=[_MODULE],
                    args=[ArgSpec("x", shape=["T", "H"]), ArgSpec("weight", shape=["H"], vary=False),
                          ArgSpec("eps", value=1e-6)],
                    cases=[Case(symbols={"T": 5, "H": 64}, dtype="float16"),
                           Case(symbols={"T": 3, "H": 128}, dtype="float16")])
    write_task(dest, spec)
    return dest


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
    from runners.sandbox import Evaluator

    bundle = norm_bundle(tmp_path_factory.mktemp("r7-rstd"))
    with Evaluator(bundle, "interpret", timeout=120, trials=2) as ev:
        return {"bundle": bundle, "baseline": ev.evaluate(ev.baseline, seed=71, time_it=False),
                "cheat": ev.evaluate(_source(RSTD), seed=72, time_it=False, static_policy=False)}


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
    (y_ref, r_ref), (y, r) = base.rms_norm_fwd(x, w), cheat.rms_norm_fwd(x, w)
    assert r.dtype == r_ref.dtype == torch.float32 and torch.equal(y, y_ref)
    assert compare_outputs([y, r], [y_ref, r_ref], DEFAULT_TOLERANCES["float16"]).ok
    at_fp32 = compare_outputs(r, r_ref, DEFAULT_TOLERANCES["float32"])
    assert not at_fp32.ok and at_fp32.err_ratio > 5, at_fp32
    assert float(((r - r_ref).abs() / r_ref.abs()).max()) > 1e-4


@pytest.mark.xfail(strict=True, reason=(
    "runners/judge.py check_case, _variant_trial and runners/judge_clock.py _corroborate compare every output with "
    "tol = self.spec.tolerance(case.dtype): the CASE's dtype. A float32 output of a float16 case (an rstd, a "
    "LayerNorm's mean, a float32 loss or router weight beside half-precision activations; bfloat16 cases are "
    "looser still: atol 1e-2, rtol 1.6e-2) is held to the half-precision tolerance, 400x float32's rtol: this rstd "
    "with 11 bits of precision (err_ratio under 1 at float16's tolerance, about 25-50 at float32's) is accepted, "
    "ok under both protocols (the window compares the same way). Fix: runners/compare.py compare_tensor takes the "
    "tolerance per output from the OUTPUT's dtype (compare_outputs(out, ref, tolerance_for) with "
    "tolerance_for(ref.dtype) = spec.tolerance(dtype name of ref)), in check_case, _variant_trial and "
    "_corroborate alike; a task that really wants a looser float32 output declares it per output in task.yaml"))
def test_a_half_precision_rstd_is_refused(rstd_runs):
    ev = rstd_runs["cheat"]
    assert not ev.ok and ev.stage == "correctness" and "output 1" in ev.error, _summary(ev)


# ---- 2. an output of a kind the wire does not know: compared as two equal marker strings -------------------------

DICT = "round7_dict_of_zeros.py"


@pytest.fixture(scope="module")
def dict_run(tmp_path_factory) -> dict:
    from runners.sandbox import Evaluator

    bundle = norm_bundle(tmp_path_factory.mktemp("r7-dict"), returns='{"y": y, "rstd": rstd}')
    with Evaluator(bundle, "interpret", timeout=120, trials=1, spare=False) as ev:
        return {"bundle": bundle, "cheat": ev.evaluate(_source(DICT), seed=73, time_it=False, static_policy=False)}


def test_a_dict_of_zeros_is_wrong(dict_run):
    """Control, outside the judge: the baseline's dict holds the normalised rows and their rstd, the cheat's zeros;
    and what the wire makes of either (runners/wire.py encode_value, decode_value) is one and the same string."""
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
    assert seen[0] == seen[1] == "<unsupported output type dict>"
    assert compare_outputs(seen[1], seen[0], DEFAULT_TOLERANCES["float16"]).ok


@pytest.mark.xfail(strict=True, reason=(
    "runners/wire.py encode_value encodes a value that is not a tensor, a tuple/list, None or a bool/int/float as "
    "{'kind': 'other', 'type': <type name>} and decode_value turns it into '<unsupported output type NAME>' on both "
    "sides; runners/compare.py compare_outputs compares non-tensors with `!=`, and two equal marker strings pass. So "
    "for an entry whose baseline returns a dict (or a dataclass, a str, a numpy scalar) nothing is compared: this "
    "candidate's zeros are accepted, ok (and in a timed run its window commits to no tensor at all, so no shown "
    "slot is checked either). Fix: runners/wire.py encodes a dict as {'kind': 'map', 'items': {key: value}} (keys "
    "sorted, str only) and a str as a scalar; any other kind in the ORACLE's reply stops the evaluation at stage "
    "'baseline' ('the baseline returns a NAME, which the judge cannot compare'), and compare_outputs never treats "
    "an unsupported marker as equal to anything"))
def test_a_dict_of_zeros_is_refused(dict_run):
    ev = dict_run["cheat"]
    assert not ev.ok and ev.stage in ("correctness", "baseline"), _summary(ev)


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


@pytest.mark.xfail(strict=True, reason=(
    "runners/judge.py _candidate_call holds tensor_layouts(reply['out']) (a flat list of dtype, shape, strides) "
    "against the oracle's and runners/compare.py compare_outputs compares flatten()-ed lists: neither sees the "
    "nesting, so `(out,)` for `out` and `((out,), res)` for `(out, res)` are accepted, ok, though every caller "
    "breaks. Fix: in _candidate_call, before the layouts, compare the encoded structure itself: a function of the "
    "meta that keeps the kind of every node and the length of every seq (and the scalars' types), "
    "structure(reply['out']) == structure(ref_reply['out']), else Refusal('correctness', 'returned a NAME where "
    "the baseline returns a NAME')"))
def test_a_tuple_for_a_tensor_is_refused(tuple_run):
    ev = tuple_run
    assert not ev.ok and ev.stage == "correctness", _summary(ev)
