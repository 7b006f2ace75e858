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


AUTOTUNED = '''\
import torch
import triton
import triton.language as tl

_ALL = [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 256) for w in (2, 8)]
CONFIGS = _ALL if torch.cuda.is_available() else _ALL[:1]


@triton.autotune(configs=CONFIGS, key=["N"])
@triton.jit
def _norm(x_ptr, y_ptr, M, N, stride, eps, BLOCK: tl.constexpr):
    pass


@triton.jit
def _other(x_ptr, BLOCK: tl.constexpr):
    pass


def norm(x, eps=1e-6):
    _norm[(x.shape[0],)](x, x, x.shape[0], x.shape[1], x.stride(0), eps)


def unrelated(x):
    _other[(1,)](x, BLOCK=128, num_warps=4)
'''


def test_autotuned_launches_get_config_and_key_knobs():
    knobs = {k.name: k for k in find_knobs(AUTOTUNED, "norm")}
    assert set(knobs) == {"configs", "key"}  # `unrelated` is not reached from the entry: no knobs from it
    configs = knobs["configs"]
    assert configs.labels[:5] == ("(as written)", "pin BLOCK=64, num_warps=2", "pin BLOCK=64, num_warps=8",
                                  "pin BLOCK=256, num_warps=2", "pin BLOCK=256, num_warps=8")
    assert "only configs with BLOCK=64" in configs.labels and configs.labels[-1].startswith("more configs")
    # the key can add the token count M, bucketed to its power of two first; strides and eps are not worth
    # re-tuning on
    assert knobs["key"].labels == ("['N']", "['N', 'M_bucket'] (re-tune per power of two of M)",
                                   "['N', 'M'] (re-tune per value of M)")
    assert {k.kernel for k in find_knobs(AUTOTUNED)} == {"_norm", "_other"}  # no entry: every launch


def test_render_pins_a_config_and_re_keys():
    knobs = find_knobs(AUTOTUNED, "norm")
    configs, key = knobs
    new = render(AUTOTUNED, knobs, {configs.key: 4, key.key: 2}, "norm")
    assert "@triton.autotune(configs=[triton.Config({'BLOCK': 256}, num_warps=8)], key=['N', 'M'])" in new
    assert new.count("\n") == AUTOTUNED.count("\n") and "CONFIGS = _ALL if" in new
    ast.parse(new)


def test_findings_say_when_the_key_cannot_tell_shapes_apart():
    from types import SimpleNamespace

    from evolver.candidate import Candidate
    from evolver.operators import LaunchTuner
    from runners.results import CaseResult, Evaluation

    tuner = LaunchTuner(AUTOTUNED, entry="norm")
    configs = next(k for k in tuner.knobs if k.name == "configs")

    def cand(i, choice, times):
        cases = [CaseResult(case=c, correct=True, baseline_us=b, candidate_us=t) for c, (b, t) in times.items()]
        return Candidate(id=i, source="", operator="tuner", genome={configs.key: choice},
                         evaluation=Evaluation(stage="done", ok=True, timed=True, cases=cases))

    archive = SimpleNamespace(candidates=[
        cand(1, 1, {"T=1": (2.0, 1.9), "T=8192": (40.0, 60.0)}),   # small config: best at decode
        cand(2, 4, {"T=1": (2.0, 2.6), "T=8192": (40.0, 25.0)}),   # large config: 1.6x at prefill
    ])
    [finding] = tuner.autotune_findings(archive)
    assert finding["best_config"] == {"T=1": "BLOCK=64, num_warps=2", "T=8192": "BLOCK=256, num_warps=8"}
    assert finding["differs"] and finding["key_blind"] and finding["pinned_speedup"]["T=8192"] == 1.6
    assert "key ['N'] cannot tell these shapes apart" in finding["note"] and "['N', 'M']" in finding["note"]
    archive.candidates = [cand(1, 1, {"T=1": (2.0, 1.98), "T=8192": (40.0, 60.0)}),  # within 5% of the
                          cand(2, 4, {"T=1": (2.0, 2.6), "T=8192": (40.0, 39.5)})]  # autotuned baseline
    [finding] = tuner.autotune_findings(archive)
    assert finding["differs"] and not finding["key_blind"]
    # No argument is free to add to the key (Liger's dyt kernel on the H200): the key is still the written one
    only_n = AUTOTUNED.replace("M, N, stride, eps, BLOCK", "N, BLOCK").replace(
        "x.shape[0], x.shape[1], x.stride(0), eps)", "x.shape[1])")
    tuner = LaunchTuner(only_n, entry="norm")
    assert not [k for k in tuner.knobs if k.name == "key"]
    configs = next(k for k in tuner.knobs if k.name == "configs")
    archive.candidates = [cand(1, 1, {"T=1": (2.0, 1.9), "T=8192": (40.0, 60.0)}),
                          cand(2, 4, {"T=1": (2.0, 2.6), "T=8192": (40.0, 25.0)})]
    [finding] = tuner.autotune_findings(archive)
    assert finding["key"] == "['N']" and "its key ['N'] cannot tell" in finding["note"]
    assert "choose the config by shape in the launcher" in finding["note"]


def test_tuner_tries_each_autotune_choice_first():
    import random

    from evolver.archive import Archive
    from evolver.candidate import Candidate
    from evolver.operators import LaunchTuner

    tuner = LaunchTuner(AUTOTUNED, entry="norm")
    archive = Archive()
    first = [tuner.propose(archive, random.Random(0)).genome for _ in range(5)]
    # the keys (bucketed, then exact), then the pins farthest-first: BLOCK=64/2 warps, then BLOCK=256/8 warps
    assert first == [{"_norm@autotune.key": 1}, {"_norm@autotune.key": 2}, {"_norm@autotune.configs": 1},
                     {"_norm@autotune.configs": 4}, {"_norm@autotune.configs": 2}]
    assert tuner.describe({"_norm@autotune.key": 2}) == [
        "_norm (line 11): autotune key: ['N'] -> ['N', 'M'] (re-tune per value of M)"]
    del Candidate


def test_a_bucketed_key_adds_an_argument_the_launch_passes():
    knobs = find_knobs(AUTOTUNED, "norm")
    key = next(k for k in knobs if k.name == "key")
    new = render(AUTOTUNED, knobs, {key.key: 1}, "norm")
    assert "key=['N', 'M_bucket'])" in new
    assert "def _norm(x_ptr, y_ptr, M, N, stride, eps, BLOCK: tl.constexpr, M_bucket=0):" in new
    assert "(x, x, x.shape[0], x.shape[1], x.stride(0), eps, M_bucket=int(x.shape[0]).bit_length())" in new
    assert "_other[(1,)](x, BLOCK=128, num_warps=4)" in new  # another kernel's launch is left alone
    ast.parse(new)


def test_no_bucket_where_a_launch_passes_the_size_with_side_effects():
    from evolver.autotune_key import bucket_value

    # one bucket per power of two: decode's 32 rows (1 token x 32 heads) and prefill's 262144 differ
    assert [eval(bucket_value(str(v))) for v in (1, 2, 3, 4, 32, 33, 262144)] == [1, 2, 2, 3, 6, 6, 19]
    impure = AUTOTUNED.replace("x.shape[0], x.shape[1]", "next(sizes), x.shape[1]")
    labels = next(k for k in find_knobs(impure, "norm") if k.name == "key").labels
    assert labels == ("['N']", "['N', 'M'] (re-tune per value of M)")  # exact only: `next(...)` runs once
    keyword = AUTOTUNED.replace("x.shape[0], x.shape[1], x.stride(0), eps)", "N=x.shape[1], M=x.shape[0], "
                                "stride=x.stride(0), eps=eps)").replace("(x, x, ", "(x, y_ptr=x, ")
    key = next(k for k in find_knobs(keyword, "norm") if k.name == "key")
    assert "M_bucket=int(x.shape[0]).bit_length())" in render(keyword, [key], {key.key: 1}, "norm")


def test_the_examples_qk_norm_is_re_keyed_on_its_row_count_before_its_configs_are_pinned():
    """tinyserve's per-head RMSNorm autotunes on ['D'] only: the first candidates put its row count in the key
    (bucketed, then exact), then pin one row per program and 64 rows per program, the two ends of its configs."""
    import random

    from evolver.archive import Archive
    from evolver.operators import LaunchTuner

    tuner = LaunchTuner((EXAMPLE / "tinyserve/kernels/qk_norm.py").read_text(), entry="qk_rms_norm")
    archive = Archive()
    first = [tuner.describe(tuner.propose(archive, random.Random(0)).genome) for _ in range(4)]
    change = [line.split("): autotune ", 1)[1] for [line] in first]
    assert change == ["key: ['D'] -> ['D', 'n_rows_bucket'] (re-tune per power of two of n_rows)",
                      "key: ['D'] -> ['D', 'n_rows'] (re-tune per value of n_rows)",
                      "configs: (as written) -> pin ROWS=1, num_warps=1",
                      "configs: (as written) -> pin ROWS=64, num_warps=8"]
