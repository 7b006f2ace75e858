"""The layout trial's padded inputs: the places outside the view hold NaN, never stale memory.

On the H200 the padding of a row-padded input held, by the caching allocator's reuse, the same values laid out
densely by the oracle's call just before: Liger's geglu_forward, which addresses its inputs with its output's
row stride (it ignores theirs), read the right rows out of that stale memory and seemed to take the layout. The
judge then held every candidate to it, and two honest launch retunes were refused for garbage the candidate's
process had in its padding (bench/results/liger-kernel-h200/, fourth session)."""
import textwrap

import torch

from bot.config import load_config, task_spec
from runners.extract import build_bundle
from runners.inputs import row_padded, strided
from runners.sandbox import Evaluator


def _outside_view(t: torch.Tensor) -> torch.Tensor:
    size = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    storage = t.as_strided((size,), (1,))
    inside = torch.zeros(size, dtype=torch.bool)
    inside[torch.as_strided(torch.arange(size), t.shape, t.stride()).reshape(-1)] = True
    return storage[~inside]


def test_the_padding_of_a_padded_input_is_nan_and_the_values_are_kept():
    x = torch.randn(3, 5, 40)
    for every_level in (False, True):
        wide, changed = row_padded({"x": x, "ids": torch.arange(12).reshape(3, 4)}, every_level=every_level)
        assert "x" in changed and not wide["x"].is_contiguous()
        assert torch.equal(wide["x"], x)
        assert bool(torch.isnan(_outside_view(wide["x"])).all()) and _outside_view(wide["x"]).numel() > 0
    ids = strided(torch.arange(12).reshape(3, 4), [6, 1])
    assert torch.equal(ids, torch.arange(12).reshape(3, 4)) and bool((_outside_view(ids) == 0).all())
    # a captured layout (q split from a fused qkv): finite gaps, the same in the oracle's and the candidate's process
    q = strided(x[0], [48, 1])
    assert torch.equal(q, x[0]) and bool((_outside_view(q) == 0).all())


def test_a_kernel_that_ignores_the_row_stride_reads_nan_whatever_the_memory_held():
    """The mechanism: the dense call's values were where such a kernel reads. Now it reads NaN in every row past
    the first, and its answer on the padded input is never the dense one."""
    x = torch.randn(4, 8)
    for _ in range(5):
        stale = torch.empty(4 * 40)
        stale[:32] = x.reshape(-1)  # the dense layout's values, where the allocator may hand them out again
        del stale
        wide = strided(x, [40, 1], gap=float("nan"))  # as row_padded makes it
        read_as_dense = wide.as_strided((4, 8), (8, 1))  # what a kernel that ignores the row stride reads
        assert torch.equal(read_as_dense[0], x[0]) and bool(torch.isnan(read_as_dense[1:]).all())


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


def test_a_retune_of_a_kernel_that_ignores_input_strides_is_accepted(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / ".github").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "geglu.py").write_text(textwrap.dedent(GEGLU))
    (repo / "tests" / "test_geglu.py").write_text("def test_nothing():\n    pass\n")
    (repo / ".github" / "kernelsmith.yml").write_text(textwrap.dedent(CONFIG))
    spec = task_spec("geglu_forward", load_config(repo).kernels["geglu_forward"], "interpret")
    bundle = tmp_path / "bundle"
    build_bundle(repo, spec, bundle)
    with Evaluator(bundle, "interpret", timeout=120, trials=1) as ev:
        retuned = ev.baseline.replace("num_warps=4", "num_warps=2")
        assert retuned != ev.baseline
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
