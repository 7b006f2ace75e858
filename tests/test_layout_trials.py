"""The layout trial's padded inputs: the places outside the view hold finite values drawn like the input's own,
never stale memory and never a marker, and they travel with the storage so that both workers see the same bytes.

On the H200 the padding of a row-padded input held, by the caching allocator's reuse, the same values laid out
densely by the oracle's call just before: Liger's geglu_forward, which addresses its inputs with its output's
row stride (it ignores theirs), read the right rows out of that stale memory and seemed to take the layout. The
judge then held every candidate to it, and two honest launch retunes were refused for garbage the candidate's
process had in its padding (bench/results/liger-kernel-h200/, fourth session). The padding was then NaN, which a
kernel could test for to take the strides only inside the judge (tests/test_judge_attacks_round5.py); it is now
the judge's finite draws, written into the tensor file with the whole storage (runners/wire.py)."""
import textwrap

import pytest
import torch

from bot.config import load_config, task_spec
from runners.extract import build_bundle
from runners.inputs import make_inputs
from runners.layouts import row_padded, strided
from runners.sandbox import Evaluator
from runners.task import ArgSpec, Case
from runners.wire import read_tensor, write_tensor


def _storage(t: torch.Tensor) -> torch.Tensor:
    return t.as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)


def _outside_view(t: torch.Tensor) -> torch.Tensor:
    storage = _storage(t)
    inside = torch.zeros(storage.numel(), dtype=torch.bool)
    places = torch.as_strided(torch.arange(storage.numel()), t.shape, t.stride(), t.storage_offset())
    inside[places.reshape(-1)] = True
    return storage[~inside]


def test_the_padding_is_finite_drawn_like_the_values_and_the_values_are_kept():
    x = torch.randn(3, 5, 40) * 3.0
    for every_level in (False, True):
        for seed in range(3):
            for spread in (False, True):
                gen = torch.Generator().manual_seed(seed)
                wide, changed = row_padded({"x": x, "ids": torch.arange(12).reshape(3, 4)}, every_level=every_level,
                                           gen=gen, spread=spread)
                assert "x" in changed and not wide["x"].is_contiguous()
                assert torch.equal(wide["x"], x)
                pad = _outside_view(wide["x"])
                assert pad.numel() > 0 and bool(torch.isfinite(pad).all())
                if spread:  # past the view's extremes, as a caller's neighbouring data may be
                    assert pad.min() < x.min() or pad.max() > x.max()
                else:  # within the values' range, of their scale, and no exact copy of a value of the view
                    assert x.min() <= pad.min() and pad.max() <= x.max()
                    assert not bool(torch.isin(pad, x.reshape(-1)).any())
                    assert 0.5 < float(pad.std()) / float(x.std()) < 1.5
    ids = torch.arange(12).reshape(3, 4)
    wide = row_padded({"ids": ids})[0]["ids"]
    assert torch.equal(wide, ids) and bool(torch.isin(_outside_view(wide), ids.reshape(-1)).all())  # indices stay


def test_the_padded_storage_is_shaped_like_a_slice_of_a_wider_buffer():
    """Neither the storage's size nor the view's offset in it marks the trial: rows x row stride, as
    ``qkv[:, :H]``'s storage, and an offset within the row's padding (0 as ``qkv[:, :H]``, more as
    ``qkv[:, H:2H]``), 16-byte aligned."""
    x = torch.randn(6, 96, dtype=torch.float16)
    offsets = set()
    for seed in range(12):
        wide = row_padded({"x": x}, gen=torch.Generator().manual_seed(seed))[0]["x"]
        rows, row_stride = wide.shape[0], wide.stride(0)
        assert wide.untyped_storage().nbytes() == rows * row_stride * x.element_size()
        assert 0 <= wide.storage_offset() <= row_stride - x.shape[1]
        assert wide.storage_offset() * x.element_size() % 16 == 0
        offsets.add(wide.storage_offset())
    assert len(offsets) >= 3  # drawn per trial, among 0, 16, 32, 48 and 64 bytes
    for every_level in (False, True):
        wide = row_padded({"q": torch.randn(3, 4, 40)}, every_level=every_level)[0]["q"]
        assert wide.untyped_storage().nbytes() == wide.shape[0] * wide.stride(0) * 4


def test_the_storage_crosses_whole_under_the_same_header_as_a_dense_input(tmp_path):
    """Each worker rebuilds the judge's buffer byte for byte (the padding included), and an input's header has
    the same fields whether it is padded or not: nothing a trial alone sends."""
    x = torch.randn(4, 40)
    wide = row_padded({"x": x}, gen=torch.Generator().manual_seed(5))[0]["x"]
    padded_meta = write_tensor(tmp_path, "wide.bin", wide, storage=True)
    dense_meta = write_tensor(tmp_path, "dense.bin", x, storage=True)
    assert set(padded_meta) == set(dense_meta)
    for _ in range(2):  # the oracle's read, the candidate's read
        back = read_tensor(padded_meta, tmp_path, 1 << 20, storage=True)
        assert torch.equal(back, x) and back.stride() == wide.stride()
        assert back.storage_offset() == wide.storage_offset()
        assert torch.equal(_storage(back), _storage(wide))
    back = read_tensor(dense_meta, tmp_path, 1 << 20, storage=True)
    assert torch.equal(back, x) and back.is_contiguous() and back.untyped_storage().nbytes() == x.numel() * 4


def test_a_captured_layout_gets_finite_padding_too_and_the_same_values():
    """A captured non-contiguous layout (q split from a fused qkv) is padded the same way, from a stream of its
    own: the view's values are those the case draws without it."""
    args = [ArgSpec(name="x", shape=["T", "H"])]
    case = Case({"T": 4, "H": 32}, "float32")
    captured = Case({"T": 4, "H": 32}, "float32", origin="captured", strides={"x": [48, 1]})
    dense, strided_x = make_inputs(args, case, "cpu", 7)["x"], make_inputs(args, captured, "cpu", 7)["x"]
    assert strided_x.stride() == (48, 1) and torch.equal(dense, strided_x)
    pad = _outside_view(strided_x)
    assert bool(torch.isfinite(pad).all()) and bool((pad != 0).all())
    assert torch.equal(_storage(make_inputs(args, captured, "cpu", 7)["x"]), _storage(strided_x))  # same seed


def test_a_kernel_that_ignores_the_row_stride_reads_wrong_rows_whatever_the_memory_held():
    """The mechanism: the dense call's values were where such a kernel reads. Now it reads the judge's padding and
    shifted rows in every row past the first, and its answer on the padded input is never the dense one."""
    x = torch.randn(4, 8)
    for seed in range(5):
        stale = torch.empty(4 * 40)
        stale[:32] = x.reshape(-1)  # the dense layout's values, where the allocator may hand them out again
        del stale
        wide = row_padded({"x": x}, gen=torch.Generator().manual_seed(seed))[0]["x"]
        read_as_dense = wide.as_strided((4, 8), (8, 1), wide.storage_offset())  # ignoring the row stride
        assert torch.equal(read_as_dense[0], x[0]) and bool(torch.isfinite(read_as_dense).all())
        for r in range(1, 4):
            assert not torch.allclose(read_as_dense[r], x[r], atol=1e-2)
    assert strided(x, [8, 1]) is x  # a dense layout stays the tensor itself


GEGLU = '''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _geglu_kernel(a, b, c, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        a += pid * stride
        b += pid * stride
        c += pid * stride
        offs = tl.arange(0, BLOCK_SIZE)
        mask = offs < n_cols
        x = tl.load(a + offs, mask=mask, other=0).to(tl.float32)
        y = tl.load(b + offs, mask=mask, other=0)
        g = 0.5 * x * (1 + tl.sigmoid(1.702 * x))
        tl.store(c + offs, g.to(y.dtype) * y, mask=mask)


    def geglu_forward(a, b):
        # as Liger's: the inputs addressed with the output's row stride
        shape = a.shape
        n = shape[-1]
        a = a.view(-1, n)
        b = b.view(-1, n)
        c = torch.empty_like(a)
        _geglu_kernel[(a.shape[0],)](a, b, c, c.stride(-2), n_cols=n, BLOCK_SIZE=triton.next_power_of_2(n),
                                     num_warps=4)
        return a, b, c.view(*shape)
'''

CONFIG = '''
    version: 1
    kernels:
      geglu_forward:
        path: pkg/geglu.py
        entry: geglu_forward
        test: tests/test_geglu.py
        dtypes: [float32]
        args:
          a: {shape: [B, T, I]}
          b: {shape: [B, T, I]}
        shapes:
          - {B: 2, T: 3, I: 40}
'''


def _geglu_bundle(tmp_path, backend: str):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / ".github").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "geglu.py").write_text(textwrap.dedent(GEGLU))
    (repo / "tests" / "test_geglu.py").write_text("def test_nothing():\n    pass\n")
    (repo / ".github" / "kernelsmith.yml").write_text(textwrap.dedent(CONFIG))
    spec = task_spec("geglu_forward", load_config(repo).kernels["geglu_forward"], backend)
    bundle = tmp_path / "bundle"
    build_bundle(repo, spec, bundle)
    return bundle


def test_a_retune_of_a_kernel_that_ignores_input_strides_is_accepted(tmp_path):
    with Evaluator(_geglu_bundle(tmp_path, "interpret"), "interpret", timeout=120, trials=1) as ev:
        retuned = ev.baseline.replace("num_warps=4", "num_warps=2")
        assert retuned != ev.baseline
        r = ev.evaluate(retuned, seed=3, time_it=False)
    assert r.ok, r.error


_needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (see bench/gpu_checks.sh)")


@pytest.mark.gpu
@_needs_gpu
def test_gpu_the_padded_storage_crosses_to_the_device_byte_for_byte(tmp_path):
    """On CUDA: the judge's generator and padding on the device, the storage read back onto the device whole
    (what the workers do with the judge's file), no byte of it left to the caching allocator."""
    x = torch.randn(5, 3, 96, device="cuda", dtype=torch.float16)
    for every_level in (False, True):
        gen = torch.Generator(device="cuda").manual_seed(3)
        wide = row_padded({"x": x}, every_level=every_level, gen=gen)[0]["x"]
        assert wide.is_cuda and torch.equal(wide, x) and bool(torch.isfinite(_storage(wide)).all())
        meta = write_tensor(tmp_path, f"w{every_level}.bin", wide, storage=True)
        for _ in range(2):
            back = read_tensor(meta, tmp_path, 1 << 30, "cuda", storage=True)
            assert back.is_cuda and back.stride() == wide.stride() and back.storage_offset() == wide.storage_offset()
            assert torch.equal(_storage(back), _storage(wide))


@pytest.mark.gpu
@_needs_gpu
def test_gpu_a_retune_of_a_kernel_that_ignores_input_strides_is_accepted(tmp_path):
    """The H200 case: Liger's geglu_forward reads its inputs with its output's row stride. Its answer on the
    padded inputs is not the dense one (it reads the judge's padding, the same bytes in both workers), so nothing
    is asked of a retune, which is accepted."""
    with Evaluator(_geglu_bundle(tmp_path, "triton"), "triton", timeout=300, trials=2) as ev:
        retuned = ev.baseline.replace("num_warps=4", "num_warps=2")
        r = ev.evaluate(retuned, seed=3, time_it=False)
    assert r.ok, r.error


def test_a_size_one_dimension_has_no_stride_to_match():
    from runners.judge import same_layout
    assert same_layout([1, 4096], [4096, 1], [4128, 1])  # one row: its stride is never stepped along
    assert not same_layout([2, 4096], [4096, 1], [4128, 1])
    assert same_layout([0, 8], [8, 1], [1, 0])
    assert not same_layout([3, 4], [4, 1], [1, 3])
    assert not same_layout([2, 4], [4, 1], [4])  # a header with fewer strides than dimensions


def test_an_output_made_with_empty_like_of_a_one_row_slice_is_accepted(tmp_path):
    """The layout trial hands a one-row input of row stride H + 32; ``torch.empty_like`` of it keeps that stride,
    and the baseline's ``torch.empty((rows, H))`` does not. Both address the same places."""
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "tinyserve"
    kernel = load_config(example).kernels["rms_norm"]
    kernel = kernel.model_copy(update={"smoke_shapes": [{"T": 1, "H": 96}]})
    spec = task_spec("rms_norm", kernel, "interpret")
    build_bundle(example, spec, tmp_path / "bundle")
    with Evaluator(tmp_path / "bundle", "interpret", timeout=120, trials=1) as ev:
        base = ev.baseline
        variant = base.replace("out = torch.empty((num_rows, hidden), dtype=hidden_states.dtype, "
                               "device=hidden_states.device)", "out = torch.empty_like(hidden_states)")
        variant = variant.replace("    out = out.view(shape)\n",
                                  "    out = out if out.shape == shape else out.view(shape)\n")
        assert variant.count("empty_like(hidden_states)") == 1 and "out if out.shape == shape" in variant
        r = ev.evaluate(variant, seed=11, time_it=False)
    assert r.ok, r.error


def test_a_share_of_the_pads_are_whole_rows_and_the_rest_are_not():
    """A fused qkv's q (row stride 3H) is what callers pass most: half the trial's pads are a whole number of rows
    (1 to 4), the rest 16-byte steps, log-uniform, which alone landed on a multiple of the row about once in 70
    draws. Half and half: a kernel wrong on either kind is caught as often."""
    x = torch.randn(6, 96, dtype=torch.float16)
    whole, widths = 0, set()
    for seed in range(200):
        wide = row_padded({"x": x}, gen=torch.Generator().manual_seed(seed))[0]["x"]
        pad = wide.stride(0) - x.shape[1]
        whole += int(pad % x.shape[1] == 0)
        widths.add(pad)
        assert 0 < pad <= 4 * x.shape[1]
    assert 70 <= whole <= 130 and len(widths) >= 20
    assert {96 * k for k in (1, 2, 3, 4)} <= widths


def test_a_kernel_wrong_only_at_whole_row_pads_is_refused(rms_bundle, rms_evaluator, tmp_path):
    """The cheat takes the strides everywhere but at a pad of whole rows, where it reads densely: right on most
    of the trial's old widths, wrong on q of a fused qkv; refused by the layout trial now (at 7 of 8 seeds on the
    interpreter's two smoke cases; before, at none)."""
    from test_judge_attacks_round6 import _import, _qkv_slice

    from conftest import CHEATS
    from runners.task import read_task

    source = (CHEATS / "wrong_at_whole_row_pads.py").read_text()
    module = read_task(rms_bundle).module
    base, cheat = _import(rms_bundle, module, None, tmp_path), _import(rms_bundle, module, source, tmp_path)
    w = torch.rand(96) + 0.5
    x = torch.randn(6, 96)
    odd = x.new_empty(6, 96 + 24)[:, :96].copy_(x)  # a pad of a quarter row: right
    assert torch.allclose(cheat.rms_norm(odd, w), base.rms_norm(x, w), atol=1e-5)
    q, dense = _qkv_slice(1)
    assert not torch.allclose(cheat.rms_norm(q, w), base.rms_norm(dense, w), atol=1e-2)
    ev = rms_evaluator.evaluate(source, seed=41, time_it=False, static_policy=False)
    assert not ev.ok and ev.stage == "correctness" and "slices of a wider buffer" in ev.error, (ev.stage, ev.error)
