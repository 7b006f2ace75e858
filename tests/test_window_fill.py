"""runners/window_fill.py: the judge's window's float inputs from a counter-based generator (one write pass), the same
bits from the Triton kernel (here under the interpreter) and from the torch form, and SlotBank.fill's use of it."""
import math

import pytest
import torch

from runners import window_fill
from runners.inputs import SlotBank
from runners.task import ArgSpec, Case

INTS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(INTS[t.element_size()])


@pytest.mark.parametrize("dtype", window_fill.DTYPES)
def test_the_kernel_gives_the_torch_forms_bits(monkeypatch, dtype):
    """The Triton kernel (what a CUDA worker runs), under the interpreter, writes exactly the torch form's values: a
    padded block of slots as SlotBank makes them (a row of several programs, its last one partly masked), an odd size,
    keys that Triton passes as int32 (small, negative) and at the ends of int64, a tiny scale (fp16 subnormals) and a
    large one."""
    monkeypatch.setattr(window_fill, "INTERPRETED", True)
    monkeypatch.setattr(window_fill, "BROKEN", [])
    cases = [((3, 4352), window_fill.key_of(5, 0, "x"), 1.0), ((5, 7), -5, 1e-3 * 0.02), ((2, 130), 1, 30.0),
             ((1, 4098), -2**63, 0.5), ((1, 64), 2**63 - 1, 2.0)]
    for shape, key, std in cases:
        kernel = torch.full(shape, float("nan"), dtype=dtype)
        window_fill.fill_kernel(kernel, key, std)
        reference = torch.full(shape, float("nan"), dtype=dtype)
        window_fill.fill_reference(reference, key, std)
        assert torch.equal(_bits(kernel), _bits(reference)), (shape, key, std)
        assert bool(torch.isfinite(kernel).all()) and float(kernel.double().abs().max()) <= 2 * math.sqrt(3) * std * 1.01
    assert window_fill.BROKEN == []


def test_the_values_look_standard_normal_and_every_slot_differs():
    """About 1.3e5 values of std 1: mean 0, std 1, the Irwin-Hall sum's kurtosis (-0.3), bounded by 2 sqrt(3), no
    correlation between neighbours (the two elements of a pair share a hash); every slot its own values, and a new seed
    (or another argument) new values in every slot."""
    block = torch.empty((16, 8192), dtype=torch.float32)
    window_fill.fill(block, window_fill.key_of(11, 0, "x"), 1.0)
    z = block.double().reshape(-1)
    mean, std = float(z.mean()), float(z.std())
    assert abs(mean) < 0.015 and abs(std - 1) < 0.015
    assert abs(float(((z - mean) ** 4).mean()) / std ** 4 - 3 + 0.3) < 0.05
    assert float(z.abs().max()) <= 2 * math.sqrt(3) and float(z.abs().max()) > 3
    for lag in (1, 2, 8192):
        assert abs(float(torch.corrcoef(torch.stack([z[:-lag], z[lag:]]))[0, 1])) < 0.015
    assert (z > 0).double().mean().item() == pytest.approx(0.5, abs=0.01)
    for a in range(16):
        for b in range(a + 1, 16):
            assert (block[a] == block[b]).double().mean().item() < 0.01
    for other in (window_fill.key_of(12, 0, "x"), window_fill.key_of(11, 1, "x"), window_fill.key_of(11, 0, "y")):
        again = torch.empty_like(block)
        window_fill.fill(again, other, 1.0)
        assert all((again[k] == block[k]).double().mean().item() < 0.01 for k in range(16))
    same = torch.empty_like(block)
    window_fill.fill(same, window_fill.key_of(11, 0, "x"), 1.0)
    assert torch.equal(same, block)


def test_a_kernel_that_cannot_run_leaves_the_torch_form_and_says_why(monkeypatch):
    """A backend that cannot compile the kernel: fill records why (BROKEN) and writes the same bits with torch; later
    fills go straight to torch. Off CUDA, and not told to interpret, the kernel is not tried."""
    block, want = torch.empty((2, 1024), dtype=torch.float16), torch.empty((2, 1024), dtype=torch.float16)
    window_fill.fill_reference(want, 99, 0.25)

    def cannot(*args, **kwargs):
        raise RuntimeError("no such instruction on this backend")

    monkeypatch.setattr(window_fill, "fill_kernel", cannot)
    monkeypatch.setattr(window_fill, "BROKEN", [])
    window_fill.fill(block, 99, 0.25)  # a CPU tensor, INTERPRETED false: torch, the kernel untried
    assert torch.equal(block, want) and window_fill.BROKEN == []
    monkeypatch.setattr(window_fill, "INTERPRETED", True)
    block.zero_()
    window_fill.fill(block, 99, 0.25)
    assert torch.equal(block, want)
    assert len(window_fill.BROKEN) == 1 and "no such instruction" in window_fill.BROKEN[0]


ARGS = [ArgSpec("x", shape=["T", "H"]), ArgSpec("y", shape=["T", "H"], vary=False),
        ArgSpec("w", shape=["H"], vary=False, scale=0.5), ArgSpec("b", shape=["H"], dtype="float32", vary=False)]
CASE = Case({"T": 4, "H": 100}, "float16")


def test_the_windows_bank_fills_from_the_generator_by_seed_and_argument():
    """SlotBank's window path (per_slot_scales False): a plain argument's block is the generator's values for a key of
    the fill's seed and the argument, padding included; two banks filled from one seed agree, another seed changes
    every slot of every argument; two arguments of one shape, dtype and scale get different values."""
    a = SlotBank(ARGS, CASE, "cpu", 6, per_slot_scales=False)
    b = SlotBank(ARGS, CASE, "cpu", 6, per_slot_scales=False)
    a.fill(41)
    b.fill(41)
    for name in ("x", "y", "w", "b"):
        assert torch.equal(a.blocks[name], b.blocks[name])
    for index, name, std in ((1, "y", 1.0), (2, "w", 0.5), (3, "b", 1.0)):
        want = torch.empty_like(a.blocks[name])
        window_fill.fill_reference(want, window_fill.key_of(41, index, name), std)
        assert torch.equal(a.blocks[name], want), name
    assert (a.blocks["x"] == a.blocks["y"]).double().mean().item() < 0.05
    assert all(not torch.equal(s["x"], s["y"]) for s in a.slots)
    before = {name: block.clone() for name, block in a.blocks.items()}
    a.fill(42)
    for name, block in a.blocks.items():
        assert all(not torch.equal(block[k], before[name][k]) for k in range(6)), name
    # the slots are views of the blocks (their first numel), each another set of values
    assert all(a.slots[k]["y"].data_ptr() == a.blocks["y"][k].data_ptr() for k in range(6))
    assert len({a.slots[k]["y"].sum().item() for k in range(6)}) == 6


def test_the_samples_and_other_dtypes_keep_torchs_generator(monkeypatch):
    """Only the window's float ``normal`` fill uses the generator: the samples (a scale per slot) do not, and a dtype it
    does not write (float8) would keep ``normal_``."""
    calls = []
    monkeypatch.setattr(window_fill, "fill", lambda *args: calls.append(args))
    SlotBank(ARGS, CASE, "cpu", 4, per_slot_scales=True).fill(3)
    assert calls == []
    SlotBank(ARGS, CASE, "cpu", 4, per_slot_scales=False).fill(3)
    assert len(calls) == 4
    assert not window_fill.supported(torch.empty(4, dtype=torch.float8_e4m3fn))
    assert not window_fill.supported(torch.empty((4, 4))[:, :2])
    assert all(window_fill.supported(torch.empty(4, dtype=d)) for d in window_fill.DTYPES)
