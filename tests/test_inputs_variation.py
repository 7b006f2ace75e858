"""Inputs that vary: a kernel right only for unit-variance inputs must meet other scales and rows."""
import torch

from runners.inputs import NEAR_ZERO, SlotBank, make_inputs
from runners.task import ArgSpec, Case

ARGS = [ArgSpec("x", shape=["T", "H"]), ArgSpec("w", shape=["H"], vary=False),
        ArgSpec("eps", range=[1e-6, 1e-2]), ArgSpec("n", range=[1, 4])]
CASE = Case({"T": 8, "H": 64}, "float32")


def test_trial_zero_is_as_configured_and_later_trials_vary():
    first = make_inputs(ARGS, CASE, "cpu", seed=1, trial=0)
    assert 0.5 < float(first["x"].std()) < 2 and first["eps"] == 1e-6 and first["n"] == 1
    scales, eps, places = set(), set(), set()
    for seed in range(2, 8):
        later = make_inputs(ARGS, CASE, "cpu", seed=seed, trial=1)
        rows = later["x"].abs().mean(dim=1)
        near = int(rows.argmin())
        assert float(rows[near]) < float(rows.median()) * 10 * NEAR_ZERO  # a near-zero row, at a drawn place
        places.add(near)
        scales.add(round(float(rows.median()), 3))
        assert 0.5 < float(later["w"].std()) < 2  # vary: false keeps the configured distribution
        assert 1e-6 <= later["eps"] <= 1e-2 and later["n"] in (1, 2, 3, 4)
        eps.add(later["eps"])
    assert max(scales) / min(scales) > 10 and len(eps) > 1  # orders of magnitude apart, scalars drawn
    assert len(places) > 1  # not always the first row: a kernel took its safe path only there (round 7)


def test_the_windows_slots_are_as_hard_as_the_later_trials_and_scalars_span_their_range():
    """The judge's window (one scale a fill): in every slot a near-zero row and a row of a large dynamic range at a
    scale of its own, at places drawn per fill; the samples' and the window's range scalars are drawn slot by slot
    (slot 0 the low end), the same in both workers (round 7: an unsafe path only in the timed calls, a kernel fast
    only at the low end)."""
    a, b = SlotBank(ARGS, CASE, "cpu", 16, per_slot_scales=False), SlotBank(ARGS, CASE, "cpu", 16,
                                                                             per_slot_scales=False)
    places = set()
    for seed in (3, 4, 5, 6):
        a.fill(seed)
        b.fill(seed)
        assert all(torch.equal(x["x"], y["x"]) for x, y in zip(a.slots, b.slots))
        for slot in a.slots:
            rows = slot["x"].float().abs().mean(dim=1)
            near = int(rows.argmin())
            assert float(rows[near]) < float(rows.median()) * 10 * NEAR_ZERO
            spread = slot["x"].float().abs().amax(dim=1) / slot["x"].float().abs().median(dim=1).values
            assert float(spread.max()) > 12  # a row whose entries span orders of magnitude (plain rows: about 4)
        places.add(near)
    assert len(places) > 1
    assert [s["eps"] for s in a.slots] == [s["eps"] for s in b.slots] and a.slots[0]["eps"] == 1e-6
    eps = {s["eps"] for s in a.slots}
    assert len(eps) == 4 and {1e-6, 1e-2} <= eps and all(1e-6 <= e <= 1e-2 for e in eps)  # the ends and two draws
    assert {s["n"] for s in a.slots} >= {1, 4}


def test_the_capture_is_warmed_up_on_every_set_of_scalar_values():
    """An integer scalar may compile another Triton specialisation (1, multiples of 16) or autotune again at a new
    value: the warm-up before the capture calls one slot of each set of scalar values, not only the first two."""
    from runners.timing import _warm_up_slots

    bank = SlotBank(ARGS, CASE, "cpu", 16)
    picked = _warm_up_slots(bank.slots)
    assert picked[:2] == [0, 1]
    combos = {(s["eps"], s["n"]) for s in bank.slots}
    assert {(bank.slots[k]["eps"], bank.slots[k]["n"]) for k in picked} == combos
    plain = [{"x": torch.ones(2), "eps": 1e-6} for _ in range(8)]
    assert _warm_up_slots(plain) == [0, 1]


def test_slot_banks_are_aligned_distinct_and_reproducible():
    a, b = SlotBank(ARGS, CASE, "cpu", 5), SlotBank(ARGS, CASE, "cpu", 5)
    a.fill(7)
    b.fill(7)
    assert all(torch.equal(x["x"], y["x"]) for x, y in zip(a.slots, b.slots))  # both workers, same values
    assert not torch.equal(a.slots[0]["x"], a.slots[1]["x"])
    base = a.slots[0]["x"].data_ptr()  # on CUDA the block itself starts 512-aligned
    assert all((s["x"].data_ptr() - base) % SlotBank.ALIGN == 0 for s in a.slots)
    before = a.slots[2]["x"].clone()
    a.fill(8)
    assert not torch.equal(before, a.slots[2]["x"])  # refilled in place, same pointers


def test_one_row_and_flat_inputs_get_a_wide_segment_too():
    """At decode sizes (one row) and for 1-D inputs there is no row to spare: a later trial scales half of it, at a
    drawn place, across 3.5 orders of magnitude, and the window an eighth of each slot (at least 64 elements); an
    unsafe one-row path (a softmax without its max) was accepted on plain values (round 7)."""
    one = Case({"T": 1, "H": 512}, "float32")
    spans = []
    for seed in range(3, 9):
        x = make_inputs(ARGS, one, "cpu", seed=seed, trial=1)["x"].abs().reshape(-1)
        spans.append(float(x.max() / x.median()))
    assert min(spans) > 10
    bank = SlotBank(ARGS, one, "cpu", 64, per_slot_scales=False)
    bank.fill(5)
    spans = [float(s["x"].abs().max() / s["x"].abs().median()) for s in bank.slots]
    assert sum(x > 10 for x in spans) >= 16  # the segment at each slot's own scale: large in many slots
    peaks = [float(s["x"].abs().max()) for s in bank.slots]
    assert max(peaks) / min(peaks) > 20  # slots at scales far apart within one fill (one scale: about 1.5)
