import ast

from conftest import EXAMPLE
from evolver.launch_params import find_knobs, render

SILU = (EXAMPLE / "tinyserve/kernels/activation.py").read_text()
RMS = (EXAMPLE / "tinyserve/kernels/rms_norm.py").read_text()


def test_finds_launch_knobs_in_each_example_kernel():
    silu = {k.name: k for k in find_knobs(SILU)}
    assert set(silu) == {"num_warps", "num_stages", "BLOCK_N"}
    assert silu["BLOCK_N"].choices[0] == "1024" and "8192" in silu["BLOCK_N"].choices
    rms = {k.name for k in find_knobs(RMS)}
    assert rms == {"num_warps", "num_stages"}  # BLOCK_N is computed: correctness depends on it


def test_render_changes_only_the_chosen_numbers():
    knobs = find_knobs(SILU)
    genome = {k.key: 1 for k in knobs if k.name in ("BLOCK_N", "num_warps")}
    new = render(SILU, knobs, genome)
    changed = [(a, b) for a, b in zip(SILU.splitlines(), new.splitlines()) if a != b]
    assert len(changed) == 2 and len(new.splitlines()) == len(SILU.splitlines())
    assert all("BLOCK_N=" in a or "num_warps=" in a for a, _ in changed)
    assert render(SILU, knobs, {}) == SILU
    ast.parse(new)


SOURCE = '''\
import triton


@triton.jit
def k(x, BLOCK: tl.constexpr):  # comment kept
    pass


@triton.autotune(configs=[], key=[])
@triton.jit
def tuned(x, BLOCK: tl.constexpr):
    pass


def run(x):
    k[(1,)](x, BLOCK=64)
    tuned[(1,)](x)
'''


def test_absent_keywords_are_added_and_autotuned_kernels_left_alone():
    knobs = find_knobs(SOURCE)
    assert {k.kernel for k in knobs} == {"k"}
    warps = next(k for k in knobs if k.name == "num_warps")
    assert warps.choices[0] is None  # not given at the launch site
    new = render(SOURCE, knobs, {warps.key: warps.choices.index("8")})
    assert "k[(1,)](x, BLOCK=64, num_warps=8)" in new and "# comment kept" in new
    assert "tuned[(1,)](x)" in new
