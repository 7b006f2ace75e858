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
    scales, eps = set(), set()
    for seed in range(2, 8):
        later = make_inputs(ARGS, CASE, "cpu", seed=seed, trial=1)
        rows = later["x"].abs().mean(dim=1)
        assert float(rows[0]) < float(rows[1:-1].mean()) * 10 * NEAR_ZERO  # a near-zero row
        scales.add(round(float(rows[1:-1].mean()), 3))
        assert 0.5 < float(later["w"].std()) < 2  # vary: false keeps the configured distribution
        assert 1e-6 <= later["eps"] <= 1e-2 and later["n"] in (1, 2, 3, 4)
        eps.add(later["eps"])
    assert max(scales) / min(scales) > 10 and len(eps) > 1  # orders of magnitude apart, scalars drawn


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
