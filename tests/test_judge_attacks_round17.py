"""Attacks on the judge, seventeenth round: what the correctness trials' inputs never hold, what the re-check after
timing draws, and what the tolerance does not bound.

1. **An integer range's ends.** runners/inputs.py ``make_tensor`` drew an integer tensor uniformly in [low, high); one
   value of a range of V turns up in a trial of T integers with a chance of about T/V. An embedding gather that never
   reads the table's last row (``tests/cheats/round17_last_id_reads_zeros.py``: an off-by-one at the end of the
   range, zeros for the last token id) was accepted at every seed tried (8 ids of 512, three trials). Control: it
   gives zeros for id V-1 and the baseline's row elsewhere. Closed here: every trial puts both ends of an integer
   tensor's range at drawn places (``range_ends``, a stream of its own so no other value moves; a value already
   there is not put again, so no duplicate is made). Refused at trial 0.
2. **The re-check after timing drew trial 0.** runners/judge.py ``evaluate`` re-checks every case after timing
   ("a candidate that behaves while checked and cuts corners once the calls pile up") with one trial, trial 0: the
   configured distribution, no scale drawn, no near-zero row, no row of large range. A RMSNorm that takes the
   baseline's path until it has been called on a slot of the judge's banks and a float16 sum of squares on every
   later call outside them (``tests/cheats/round17_unsafe_once_timed.py``) was accepted on the timed CPU stand-in
   under both protocols (verify and search; the judge's window, on bank slots, saw the baseline's path). Control:
   once "timed", the float16 path is right on the re-check's trial-0 inputs and wrong on a row past 256. Closed
   here: the re-check draws trial 1 (a scale, the structured rows; held to the first trial's output scales, as the
   later trials are). It is one trial a case, so it catches this cheat where that trial's draw reaches the float16
   path's failure (here 9 of 40 secrets at one case of 4 x 64; the first correctness trials are no surer). The form
   that counts its calls after timing (the re-check makes one a case; a caller makes millions) is the inherent limit
   of a judge whose calls can be told from a caller's, as ``tests/test_judge_attacks.py``.
3. **An error of one sign.** runners/compare.py bounds each element's error (``atol + rtol |ref|``) and, at smaller
   scales, the whole output's L2 error, never its sign. silu(x) * y written 0.25 % too large everywhere
   (``tests/cheats/round17_one_signed_error.py``) is within float16's tolerance at every element and scale, and is
   accepted (strict xfail). Control: its least-squares gain against the reference is 2.5e-3 where an honest float16
   rounding's is about 1e-5 (its errors as often up as down); every sum of its outputs inherits the gain. Fix
   (suggested, not made: the threshold needs the GPU suite's honest candidates run against it): hold the fitted gain
   ``<out - ref, ref> / <ref, ref>`` to a fraction of ``rtol`` (rtol / 8) plus a few of the dtype's eps over the
   square root of the count, per output, at every trial.
4. **A row whose every score is the finite mask value.** The masked trial (runners/layouts.py ``masked_rows``) puts
   -inf over parts of rows, never a whole row (the baseline is NaN there, nothing asked) and never
   ``torch.finfo(dtype).min``, the additive mask Hugging Face's attention uses, under which a padding row, every score
   masked, is finite: the uniform distribution. A softmax that writes zeros for a row whose maximum is the mask value
   (``tests/cheats/round17_zeros_for_a_row_all_masked.py``: a block-sparse softmax's skip of masked tiles that forgets
   the row all of whose tiles are) was right on every row the judge drew and accepted. Closed: where the baseline
   takes the -inf masks, a trial of its own follows with rows wholly and partly at ``finfo.min``
   (``masked_rows(..., lowest=True)``), asked where the baseline is finite.

Runs on the interpreter and on the timed CPU stand-in (round 4's ``_timed_judge``); module fixtures, small shapes.
"""
from __future__ import annotations

import json

import pytest
import torch
from conftest import CHEATS
from test_judge_attacks_round4 import _import, _source, _timed_judge, softmax_bundle  # noqa: F401 (fixture)
from test_judge_attacks_round7 import _load, _summary, one_module_bundle
from test_judge_attacks_round8 import _SILU_MODULE, _baseline_and_cheat, silu_bundle  # noqa: F401 (fixture)

from runners.compare import compare_outputs, output_scales
from runners.inputs import make_inputs, range_ends
from runners.protocol import trial_seed
from runners.task import DEFAULT_TOLERANCES, ArgSpec, Case, read_task

# ---- 1. an integer range's ends -------------------------------------------------------------------------------------

_EMBED = '''"""Rows of a table, one per id."""
import torch
import triton
import triton.language as tl


@triton.jit
def _embed_kernel(ids_ptr, table_ptr, out_ptr, stride_t, stride_o, V, D, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    idx = tl.load(ids_ptr + t).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < D
    row = tl.load(table_ptr + idx * stride_t + offs, mask=mask, other=0.0)
    tl.store(out_ptr + t * stride_o + offs, row, mask=offs < D)


def embed(ids, table):
    count = ids.numel()
    vocab, dim = table.shape
    out = torch.empty((count, dim), dtype=table.dtype, device=table.device)
    _embed_kernel[(count,)](ids, table, out, table.stride(0), out.stride(0), vocab, dim,
                            BLOCK=triton.next_power_of_2(dim))
    return out
'''
_EMBED_MODULE = "emb/embed.py"
VOCAB = 512
LAST_ID = "round17_last_id_reads_zeros.py"
_EMBED_ARGS = [ArgSpec("ids", shape=["T"], dtype="int64", low=0, high=VOCAB), ArgSpec("table", shape=[VOCAB, "D"])]
_EMBED_CASE = Case(symbols={"T": 8, "D": 32}, dtype="float32")


@pytest.fixture(scope="module")
def embed_bundle(tmp_path_factory):
    return one_module_bundle(tmp_path_factory.mktemp("r17-embed"), _EMBED_MODULE, _EMBED, kernel="embed",
                             entry="embed", args=_EMBED_ARGS, cases=[_EMBED_CASE])


@pytest.fixture(scope="module")
def embed_runs(embed_bundle) -> dict:
    from runners.sandbox import Evaluator

    with Evaluator(embed_bundle, "interpret", timeout=120, trials=3) as ev:
        return {"baseline": ev.evaluate(ev.baseline, seed=2, time_it=False),
                "cheat": ev.evaluate(_source(LAST_ID), seed=3, time_it=False, static_policy=False)}


def test_the_last_id_reads_zeros_and_a_uniform_draw_rarely_holds_it(embed_bundle):
    """Control, outside the judge: the cheat gives zeros for id V-1 and the baseline's rows for every other id; drawn
    uniformly (the judge's draw before this round), 8 ids of 512 hold V-1 in about 1.6 % of trials."""
    base = _load(embed_bundle / "baseline" / _EMBED_MODULE, "r17_embed_base")
    cheat = _load(CHEATS / LAST_ID, "r17_embed_cheat")
    table = torch.randn(VOCAB, 32, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([0, 7, VOCAB - 2, VOCAB - 1, 3])
    got, want = cheat.embed(ids, table), base.embed(ids, table)
    assert torch.equal(want, table[ids])
    assert torch.equal(got[[0, 1, 2, 4]], want[[0, 1, 2, 4]]) and bool((got[3] == 0).all())
    g = torch.Generator().manual_seed(1)
    held = sum(bool((torch.randint(0, VOCAB, (8,), generator=g) == VOCAB - 1).any()) for _ in range(2000))
    assert held < 60  # about 31 of 2000


def test_every_trial_holds_both_ends_of_an_integer_range():
    """What closes it: every trial's integer tensor holds ``low`` and ``high - 1`` (at drawn places), the floating
    tensors' values are what they were, and a draw without duplicates gets none."""
    for trial in range(3):
        for seed in range(20):
            a = make_inputs(_EMBED_ARGS, _EMBED_CASE, "cpu", seed, trial)
            assert {0, VOCAB - 1} <= set(a["ids"].tolist())
            g = torch.Generator().manual_seed(seed)
            torch.randint(0, VOCAB, (8,), generator=g)
            assert torch.equal(a["table"], torch.randn(VOCAB, 32, generator=g) * 1.0) or trial > 0
    for seed in range(300):  # no duplicates; some draws hold one end where the other is put (CI drew one unseeded)
        distinct = torch.randperm(64, generator=torch.Generator().manual_seed(seed))[:10]
        ends = range_ends(distinct.clone(), 0, 64, torch.Generator().manual_seed(seed % 5))
        assert len(set(ends.tolist())) == 10 and {0, 63} <= set(ends.tolist()), (distinct, ends)
    already = torch.tensor([0, 5, 63, 9])
    assert torch.equal(range_ends(already.clone(), 0, 64, torch.Generator().manual_seed(0)), already)
    assert torch.equal(range_ends(torch.ones(4, dtype=torch.bool), 0, 2, torch.Generator()), torch.ones(4, dtype=torch.bool))


# Was a hole (closed this round): accepted at every seed tried (2-7) with three trials; now refused at trial 0.
def test_a_gather_wrong_at_the_ranges_end_is_refused(embed_runs):
    assert embed_runs["baseline"].ok, _summary(embed_runs["baseline"])
    ev = embed_runs["cheat"]
    assert not ev.ok and ev.stage == "correctness" and "trial 0" in ev.error, _summary(ev)


# ---- 2. the re-check after timing ------------------------------------------------------------------------------------

ONCE_TIMED = "round17_unsafe_once_timed.py"
_RMS_MODULE = "tinyserve/kernels/rms_norm.py"
TWELVE = {"max_slots": 12, "max_window_slots": 12, "reveal_slots": 12}  # banks of 12 slots, as round 4's
RECHECK_SYMBOLS = {"T": 4, "H": 64}
RECHECK_SEED = 1  # a secret whose re-check (secret + 1, trial 1) reaches past 256 (9 of 40 secrets at this case)


DROPS_STRIDES = "round17_drops_strides_once_timed.py"


@pytest.fixture(scope="module")
def recheck_runs(rms_bundle, tmp_path_factory) -> list:
    return _timed_judge(rms_bundle, tmp_path_factory.mktemp("r17-recheck"),
                        [(_source(ONCE_TIMED), "verify", RECHECK_SEED, TWELVE),
                         (_source(DROPS_STRIDES), "verify", RECHECK_SEED, TWELVE)], RECHECK_SYMBOLS)


@pytest.fixture(scope="module")
def recheck_run(recheck_runs) -> dict:
    return recheck_runs[0]


def test_once_timed_the_float16_path_is_right_on_trial_zero_and_wrong_on_the_later_trials(rms_bundle, tmp_path):
    """Control, outside the judge: before any call on a bank's slot the cheat is the baseline; after one, a call on a
    tensor of its own takes the float16 sum of squares: right on the inputs trial 0 draws at the re-check's secret
    (what the re-check drew before this round), wrong on trial 1's there and on a caller's row past 256."""
    base = _import(rms_bundle, _RMS_MODULE, None, tmp_path)
    cheat = _import(rms_bundle, _RMS_MODULE, _source(ONCE_TIMED), tmp_path)
    spec = read_task(rms_bundle)
    case = Case(symbols=RECHECK_SYMBOLS, dtype="float16")
    tol = spec.tolerances_for("float16")
    g = torch.Generator().manual_seed(0)
    row = (torch.randn(4, 64, generator=g) * 100).half()  # a caller's activations with values past 256
    w = torch.randn(64, generator=g).half()
    assert compare_outputs(cheat.rms_norm(row, w), base.rms_norm(row, w), tol).ok  # not timed yet: the baseline
    bank = torch.randn(12, 4 * 64, generator=g).half()
    cheat.rms_norm(bank[3].view(4, 64), w)  # a call on a slot of a bank: "timed"
    assert cheat._TIMED[0]
    assert not compare_outputs(cheat.rms_norm(row, w), base.rms_norm(row, w), tol).ok
    first = make_inputs(spec.args, case, "cpu", trial_seed(RECHECK_SEED, 0, 0), 0)
    scales = output_scales([base.rms_norm(**first), []])
    plain = make_inputs(spec.args, case, "cpu", trial_seed(RECHECK_SEED + 1, 0, 0), 0)
    assert compare_outputs(cheat.rms_norm(**plain), base.rms_norm(**plain), tol, scales).ok
    later = make_inputs(spec.args, case, "cpu", trial_seed(RECHECK_SEED + 1, 1, 0), 1)
    assert not compare_outputs([cheat.rms_norm(**later), []], [base.rms_norm(**later), []], tol, scales).ok


# Was a hole (closed this round): accepted on this stand-in under verify and search (seeds 5 and 6), the window's
# passes on bank slots seeing the baseline's path and the trial-0 re-check the float16 path on plain rows. Now the
# re-check draws trial 1, and the verdict comes after the timing phase (the window ran: window_ms).
def test_a_corner_cut_once_timed_is_refused_by_the_recheck(recheck_run):
    ev = recheck_run
    assert ev["window_ms"] and ev["window_ms"][0], json.dumps(ev)
    assert not ev["ok"] and ev["stage"] == "correctness" and "trial 1" in ev["error"], json.dumps(ev)


def test_strides_dropped_once_timed_are_refused_by_the_rechecks_layouts(rms_bundle, tmp_path, recheck_runs):
    """The same trigger with another corner cut: rows addressed as row * N once timed. Control: right on dense rows
    after a call on a bank's slot, wrong on rows that are slices of wider ones. The re-check after timing now tries
    the padded layouts too (``Protocol.recheck_layout``; the search's screening leaves them to the verification)."""
    base = _import(rms_bundle, _RMS_MODULE, None, tmp_path)
    cheat = _import(rms_bundle, _RMS_MODULE, _source(DROPS_STRIDES), tmp_path)
    tol = read_task(rms_bundle).tolerances_for("float16")
    g = torch.Generator().manual_seed(1)
    w = torch.randn(64, generator=g).half()
    cheat.rms_norm(torch.randn(12, 4 * 64, generator=g).half()[3].view(4, 64), w)  # "timed"
    dense = torch.randn(4, 64, generator=g).half()
    wide = torch.randn(4, 3 * 64, generator=g).half()[:, :64]
    assert compare_outputs(cheat.rms_norm(dense, w), base.rms_norm(dense, w), tol).ok
    assert not compare_outputs(cheat.rms_norm(wide, w), base.rms_norm(wide, w), tol).ok
    ev = recheck_runs[1]
    assert ev["window_ms"] and ev["window_ms"][0], json.dumps(ev)  # timed first, refused after
    assert not ev["ok"] and ev["stage"] == "correctness" and "slices of a wider buffer" in ev["error"], json.dumps(ev)


# ---- 3. an error of one sign -----------------------------------------------------------------------------------------

ONE_SIGNED = "round17_one_signed_error.py"


@pytest.fixture(scope="module")
def biased_runs(silu_bundle) -> dict:  # noqa: F811
    return _baseline_and_cheat(silu_bundle, ONE_SIGNED, seed=171, trials=3)


def _gain(out: torch.Tensor, ref: torch.Tensor) -> float:
    o, r = out.double().flatten(), ref.double().flatten()
    return float(torch.dot(o - r, r) / torch.dot(r, r))


def test_the_one_signed_error_is_within_tolerance_and_a_gain_every_sum_inherits(silu_bundle):  # noqa: F811
    """Control, outside the judge: every element within float16's tolerance, at unit scale and at a small one (whole
    output too); but the error's fitted gain is 2.5e-3 at every scale where the honest float16 rounding of the same
    op's is under 1e-4, and a sum of outputs is off by that gain."""
    base = _load(silu_bundle / "baseline" / _SILU_MODULE, "r17_silu_base")
    cheat = _load(CHEATS / ONE_SIGNED, "r17_silu_cheat")
    tol = DEFAULT_TOLERANCES["float16"]
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(64, 256, generator=g), torch.randn(64, 256, generator=g)
    exact = x / (1 + torch.exp(-x)) * y  # float32, the op itself
    ref, got = base.silu_mul(x.half(), y.half()), cheat.silu_mul(x.half(), y.half())
    first = output_scales(ref)
    assert compare_outputs(got, ref, tol).ok
    for s in (1e-2, 1e-3):
        xs, ys = (x * s ** 0.5).half(), (y * s ** 0.5).half()
        assert compare_outputs(cheat.silu_mul(xs, ys), base.silu_mul(xs, ys), tol, first).ok
    assert abs(_gain(got, ref) - 2.5e-3) < 2e-4
    assert abs(_gain(ref, exact)) < 1e-4  # the honest kernel: its rounding errors cancel
    positive = exact.clamp_min(0)  # a sum over many outputs (a dot product's terms of one sign)
    assert abs(float(got.float().clamp_min(0).sum() / positive.sum()) - 1.0025) < 3e-4
    assert abs(float(ref.float().clamp_min(0).sum() / positive.sum()) - 1.0) < 1e-4


@pytest.mark.xfail(strict=True, reason=(
    "runners/compare.py compare_tensor/_whole_output bound the size of each element's error (atol + rtol |ref|) and, "
    "at smaller scales, of the whole output's L2 error; nothing bounds its mean or sign. silu(x) * y written 0.25 % "
    "too large at every element (a gain of 1.0025, within float16's rtol 4e-3 with the roundings) is accepted at "
    "every trial; every sum of its outputs is 0.25 % off where an honest kernel's rounding errors cancel. Fix: per "
    "floating output, hold the fitted gain <out - ref, ref> / <ref, ref> to rtol / 8 plus a few eps / sqrt(n) "
    "(an honest float16 rounding's is ~1e-5 here; the cheat's 2.5e-3); to be run against the GPU suite's honest "
    "candidates before it is made"))
def test_an_error_of_one_sign_within_the_tolerance_is_refused(biased_runs):
    assert biased_runs["baseline"].ok, _summary(biased_runs["baseline"])
    ev = biased_runs["cheat"]
    assert ev.stage not in ("compile", "crashed", "baseline"), _summary(ev)
    assert not ev.ok and ev.stage == "correctness", _summary(ev)


# ---- 4. a row whose every score is the finite mask value ----------------------------------------------------------

ALL_MASKED = "round17_zeros_for_a_row_all_masked.py"
_SOFTMAX_MODULE = "tinyserve/kernels/softmax.py"


@pytest.fixture(scope="module")
def masked_run(softmax_bundle):  # noqa: F811
    from runners.sandbox import Evaluator

    with Evaluator(softmax_bundle, "interpret", timeout=120, trials=2) as ev:
        return ev.evaluate(_source(ALL_MASKED), seed=172, time_it=False, static_policy=False)


def test_a_row_all_at_the_mask_value_is_zeros_where_the_baseline_is_uniform(softmax_bundle, tmp_path):  # noqa: F811
    """Control, outside the judge: rows partly masked (with -inf or with finfo.min) and plain rows are the
    baseline's; a row whose every score is finfo(float16).min (Hugging Face's padding row) is zeros from the cheat,
    1/N from the baseline."""
    base = _import(softmax_bundle, _SOFTMAX_MODULE, None, tmp_path)
    cheat = _import(softmax_bundle, _SOFTMAX_MODULE, _source(ALL_MASKED), tmp_path)
    tol = DEFAULT_TOLERANCES["float16"]
    lowest = torch.finfo(torch.float16).min
    x = torch.randn(4, 200, generator=torch.Generator().manual_seed(0)).half()
    x[1, :150] = float("-inf")
    x[2, 50:] = lowest
    assert compare_outputs(cheat.softmax(x), base.softmax(x), tol).ok
    x[3] = lowest
    want, got = base.softmax(x), cheat.softmax(x)
    assert torch.allclose(want[3].float(), torch.full((200,), 1 / 200), rtol=4e-3)
    assert bool((got[3] == 0).all())
    assert not compare_outputs(got, want, tol).ok


def test_zeros_for_a_row_all_at_the_mask_value_are_refused(masked_run):
    """(Was a hole, accepted: runners/layouts.py masked_rows put -inf over parts of rows only, a whole -inf row makes
    the baseline NaN, and no trial held a row whose maximum is the finite mask value torch.finfo(dtype).min, Hugging
    Face's additive mask, under which a padding row is the uniform distribution.) Where the baseline takes the -inf
    masks, the masked trial is followed by one with rows wholly and partly at finfo.min (``lowest``)."""
    assert masked_run.stage not in ("compile", "crashed", "baseline"), _summary(masked_run)
    assert not masked_run.ok and masked_run.stage == "correctness", _summary(masked_run)
    assert "large finite negative value" in masked_run.error, _summary(masked_run)
