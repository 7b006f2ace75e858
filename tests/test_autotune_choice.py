"""A choice of config by size for autotuned kernels whose key misses the size (evolver/autotune_choice.py).

Given pinned-config candidates with per-case times (real Candidate and Evaluation objects, times made up: the
interpreter times nothing), the tuner proposes one candidate that picks, per power of two of the row count, the
pin that was fastest there. The candidate is then imported and run under the Triton interpreter: its outputs
match the baseline's and the autotuner holds the chosen config at each size.
"""
from __future__ import annotations

import ast
import importlib
import random
import shutil
import sys
import uuid

import pytest
import torch
from conftest import EXAMPLE

from evolver.archive import Archive
from evolver.autotune_choice import _nearest, choice_key
from evolver.candidate import Candidate
from evolver.operators import LaunchTuner
from runners.policy import check_source
from runners.results import CaseResult, Evaluation
from runners.task import ArgSpec, Case, TaskSpec

QK = (EXAMPLE / "tinyserve/kernels/qk_norm.py").read_text()
QK_SPEC = TaskSpec(kernel="qk_rms_norm", module="tinyserve/kernels/qk_norm.py", entry="qk_rms_norm",
                   args=[ArgSpec("x", ["T", "H", "D"]), ArgSpec("weight", ["D"]), ArgSpec("eps", value=1e-6)],
                   cases=[Case({"T": 1, "H": 32, "D": 128}, dt) for dt in ("float16", "bfloat16")]
                   + [Case({"T": 8192, "H": 32, "D": 128}, "float16"), Case({"T": 8192, "H": 8, "D": 128}, "float16")])

# A synthetic kernel: literal configs on a decorator written over several lines (a trailing comma), the row count
# passed as `x.shape[0]` (read exactly at each case), a key on the width only.
SYNTH = '''\
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"R": 1}, num_warps=1), triton.Config({"R": 4}, num_warps=2),
             triton.Config({"R": 16}, num_warps=4)],
    key=["N"],
)
@triton.jit
def _double(x_ptr, y_ptr, M, N, BLOCK_N: tl.constexpr, R: tl.constexpr):
    rows = tl.program_id(0) * R + tl.arange(0, R)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], x * 2, mask=mask)


def double(x):
    y = torch.empty_like(x)
    n = x.shape[1]
    _double[lambda meta: (triton.cdiv(x.shape[0], meta["R"]),)](x, y, x.shape[0], n,
                                                                 BLOCK_N=triton.next_power_of_2(n))
    return y
'''
SYNTH_SPEC = TaskSpec(kernel="double", module="double.py", entry="double", args=[ArgSpec("x", ["M", "N"])],
                      cases=[Case({"M": 3, "N": 64}, "float32"), Case({"M": 40, "N": 64}, "float32"),
                             Case({"M": 5000, "N": 64}, "float32")])


def timed(i: int, genome: dict, times: dict[str, float]) -> Candidate:
    cases = [CaseResult(case=c, correct=True, trials=3, baseline_us=10.0, candidate_us=t) for c, t in times.items()]
    return Candidate(id=i, source=f"# {i}", operator="tuner", genome=genome,
                     evaluation=Evaluation(stage="done", ok=True, timed=True, cases=cases))


def pin(tuner: LaunchTuner, label: str) -> dict:
    configs = next(k for k in tuner.knobs if k.name == "configs")
    return {configs.key: configs.labels.index(f"pin {label}")}


def archive_of(tuner: LaunchTuner, *pins: tuple[str, dict]) -> Archive:
    archive = Archive()
    base = Candidate(0, tuner.baseline, "baseline")
    base.evaluation = Evaluation(stage="done", ok=True, timed=True)
    archive.add(base)
    for i, (label, times) in enumerate(pins, start=1):
        archive.add(timed(i, pin(tuner, label), times))
    return archive


def qk_times(decode: float, prefill: float) -> dict[str, float]:
    return {c.id: decode if c.symbols["T"] == 1 else prefill for c in QK_SPEC.cases}


def load(tmp_path, source: str, name: str, helpers=(), gpu_configs: bool = False):
    """Import ``source`` as ``<package>.<name>`` from a fresh folder (``helpers``: example modules beside it).
    ``gpu_configs``: import as if a GPU were present, so that the example keeps its full config list."""
    package = f"ks_choice_{uuid.uuid4().hex[:12]}"  # a fresh module: no autotuner cache of another test
    folder = tmp_path / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for helper in helpers:
        shutil.copy(EXAMPLE / "tinyserve/kernels" / helper, folder / helper)
    (folder / f"{name}.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    real = torch.cuda.is_available
    try:
        if gpu_configs:
            torch.cuda.is_available = lambda: True
        return importlib.import_module(f"{package}.{name}")
    finally:
        torch.cuda.is_available = real
        sys.path.remove(str(tmp_path))


def test_qk_norm_gets_a_choice_by_row_count_once_two_pins_disagree(tmp_path):
    tuner = LaunchTuner(QK, entry="qk_rms_norm", spec=QK_SPEC)
    # one row per program fastest at decode (32 rows), 64 rows per program at prefill (65536 and 262144 rows)
    archive = archive_of(tuner, ("ROWS=1, num_warps=1", qk_times(1.16, 159.4)),
                         ("ROWS=64, num_warps=8", qk_times(1.63, 34.7)))
    cand = tuner.propose(archive, random.Random(0))
    value = cand.genome[choice_key("_qk_rms_norm_kernel")]
    assert set(cand.genome) == {"_qk_rms_norm_kernel@autotune.choice"} and value["by"] == "n_rows"
    configs = next(k for k in tuner.knobs if k.name == "configs")
    # buckets 6 (32 rows) and 17 (65536): halfway is bucket 11, up to 2047 rows
    assert value["table"] == [[2047, configs.labels.index("pin ROWS=1, num_warps=1")],
                              [None, configs.labels.index("pin ROWS=64, num_warps=8")]]
    assert tuner.describe(cand.genome) == [
        "_qk_rms_norm_kernel (line 25): autotune config chosen by n_rows: n_rows <= 2047: ROWS=1, num_warps=1; "
        "above: ROWS=64, num_warps=8 (key ['D', 'n_rows_bucket'])"]
    ast.parse(cand.source)
    assert check_source(cand.source, QK, "qk_rms_norm") == []
    assert "(2047, {'ROWS': 1, 'num_warps': 1})," in cand.source and "n_rows=32 (T=1,H=32,D=128/bfloat16, " \
        "T=1,H=32,D=128/float16): ROWS=1, num_warps=1" in " ".join(cand.source.replace("# ", "").split("\n"))
    assert "n_rows_bucket=int(n_rows).bit_length()" in cand.source  # the launch passes the bucket: the cache key

    # the same proposal is not made twice; the sweep goes on
    again = tuner.propose(archive, random.Random(0))
    assert choice_key("_qk_rms_norm_kernel") not in again.genome

    base = load(tmp_path / "base", QK, "qk_norm", helpers=("utils.py",))
    chosen = load(tmp_path / "cand", cand.source, "qk_norm", helpers=("utils.py",), gpu_configs=True)
    tuned = chosen._qk_rms_norm_kernel
    assert len(tuned.configs) == 9  # the original list, all of it
    weight = torch.randn(32)
    # 8 rows: below every measured bucket, the smallest's config; 32 rows: measured; 256 rows (bucket 9): nearer
    # to 6 than to 17; 2048 rows (bucket 12): nearer to 17, ROWS=64
    for tokens, heads, want in ((2, 4, (1, 1)), (1, 32, (1, 1)), (64, 4, (1, 1)), (256, 8, (64, 8))):
        x = torch.randn(tokens, heads, 32)
        got = chosen.qk_rms_norm(x, weight)
        # the baseline (one row per program on the interpreter) at the sizes it runs quickly; the torch reference
        want_out = base.qk_rms_norm(x, weight) if tokens * heads <= 32 else reference_qk(x, weight)
        torch.testing.assert_close(got, want_out, atol=1e-5, rtol=1e-5)
        assert (tuned.best_config.kwargs["ROWS"], tuned.best_config.num_warps) == want, (tokens, heads)
    assert {key[1] for key in tuned.cache} == {4, 6, 9, 12}  # one autotuner entry per power of two


def reference_qk(x, weight, eps=1e-6):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def test_a_single_pin_or_one_pin_best_everywhere_proposes_no_choice():
    tuner = LaunchTuner(QK, entry="qk_rms_norm", spec=QK_SPEC)
    archive = archive_of(tuner, ("ROWS=1, num_warps=1", qk_times(1.16, 159.4)))
    for _ in range(3):
        cand = tuner.propose(archive, random.Random(0))
        assert not any(k.endswith("@autotune.choice") for k in cand.genome)
    archive = archive_of(tuner, ("ROWS=1, num_warps=1", qk_times(1.16, 159.4)),
                         ("ROWS=64, num_warps=8", qk_times(1.63, 170.0)))  # ROWS=1 fastest at every size
    assert choice_key("_qk_rms_norm_kernel") not in tuner.propose(archive, random.Random(0)).genome
    # without the task's cases, no sizes: no choice either
    blind = LaunchTuner(QK, entry="qk_rms_norm")
    archive = archive_of(blind, ("ROWS=1, num_warps=1", qk_times(1.16, 159.4)),
                         ("ROWS=64, num_warps=8", qk_times(1.63, 34.7)))
    assert choice_key("_qk_rms_norm_kernel") not in blind.propose(archive, random.Random(0)).genome


def test_buckets_without_data_take_the_nearest_measured_one():
    assert _nearest([(6, 1), (17, 2)]) == ((2047, 1), (None, 2))  # 11 is 5 from 6 and 6 from 17
    assert _nearest([(6, 1), (8, 2)]) == ((127, 1), (None, 2))  # 7 is as near to both: the smaller
    assert _nearest([(3, 1), (5, 1), (9, 2), (12, 1)]) == ((127, 1), (1023, 2), (None, 1))  # runs merge


def test_a_synthetic_kernel_chooses_by_the_launchs_own_row_count(tmp_path):
    tuner = LaunchTuner(SYNTH, entry="double", spec=SYNTH_SPEC)
    ids = [c.id for c in SYNTH_SPEC.cases]  # 3, 40 and 5000 rows: buckets 2, 6 and 13
    archive = archive_of(tuner, ("R=1, num_warps=1", dict(zip(ids, (1.0, 2.0, 90.0)))),
                         ("R=4, num_warps=2", dict(zip(ids, (1.1, 1.5, 40.0)))),
                         ("R=16, num_warps=4", dict(zip(ids, (1.3, 1.6, 20.0)))))
    cand = tuner.propose(archive, random.Random(0))
    value = cand.genome[choice_key("_double")]
    configs = next(k for k in tuner.knobs if k.name == "configs")
    assert [(limit, configs.labels[p]) for limit, p in value["table"]] == [
        (15, "pin R=1, num_warps=1"), (511, "pin R=4, num_warps=2"), (None, "pin R=16, num_warps=4")]
    assert "the launch's `x.shape[0]` at the cases' shapes" in " ".join(
        line.lstrip("# ") for line in cand.source.splitlines())
    assert "key=['N', 'M_bucket'],\n    prune_configs_by={'early_config_prune': _double_config_by_M}," in cand.source
    assert check_source(cand.source, SYNTH, "double") == []
    module = load(tmp_path, cand.source, "double")
    # bucket 4 (8-15 rows) is as near to 2 as to 6: the smaller; 16 rows (bucket 5) is nearer to 6
    for rows, want in ((2, 1), (15, 1), (16, 4), (300, 4), (600, 16)):
        x = torch.randn(rows, 48)
        torch.testing.assert_close(module.double(x), x * 2)
        assert module._double.best_config.kwargs == {"R": want}, rows


def test_the_findings_report_the_choice_and_what_it_measured():
    from test_report_findings import report

    from bot.report import render_markdown

    tuner = LaunchTuner(QK, entry="qk_rms_norm", spec=QK_SPEC)
    archive = archive_of(tuner, ("ROWS=1, num_warps=1", qk_times(1.16, 159.4)),
                         ("ROWS=64, num_warps=8", qk_times(1.63, 34.7)))
    cand = tuner.propose(archive, random.Random(0))
    cand.id = archive.next_id()
    cand.evaluation = timed(0, {}, qk_times(1.2, 35.0)).evaluation
    archive.add(cand)
    [finding] = tuner.autotune_findings(archive)
    assert finding["choice"]["fitness"] == pytest.approx((10 / 1.2 * 10 / 35.0) ** 0.5, abs=1e-3)
    assert "with the config chosen by n_rows: n_rows <= 2047: ROWS=1, num_warps=1; above: ROWS=64, num_warps=8 " \
           "(key ['D', 'n_rows_bucket']) written in the source it measured 1.54x" in finding["note"]
    md = render_markdown(report(autotune=[finding]))
    assert "written in the source it measured 1.54x (geometric mean)." in md
    assert "| case | fastest pinned config | its speedup over the autotuned kernel | the config chosen by size |" in md
    assert "| `T=8192,H=32,D=128/float16` | ROWS=64, num_warps=8 | 0.288× | 0.286× |" in md


# The H200's times of the QK-norm's configs (bench/results/example-autotune-h200/qk-configs.json, fp16, µs), at
# decode (T=1, 32 rows) and prefill (T=8192, 262144 rows), replayed below on the interpreter's smoke cases.
H200_US = {"decode": {(1, 1): 1.16, (1, 4): 1.58, (1, 8): 1.58, (8, 1): 1.47, (8, 4): 1.34, (8, 8): 1.33,
                      (64, 1): 3.34, (64, 4): 1.74, (64, 8): 1.63},
           "prefill": {(1, 1): 159.4, (1, 4): 160.52, (1, 8): 240.26, (8, 1): 33.96, (8, 4): 33.98, (8, 8): 38.58,
                       (64, 1): 41.69, (64, 4): 37.06, (64, 8): 34.7}}


@pytest.mark.slow  # about 30 s: the baseline check and five evaluations on the interpreter
def test_a_search_on_the_interpreter_proposes_evaluates_and_describes_the_choice(tmp_path):
    """The engine, the real evaluator (three processes, the Triton interpreter) and the tuner together. The
    interpreter times nothing, so each correct evaluation gets replayed H200 times for the config it runs at each
    case (decode's for the smaller smoke case, prefill's for the larger): the search reaches the choice after the
    two re-keys and two pins, the evaluator finds it correct, and the report's words name it."""
    import re

    from bot.config import load_config, task_spec
    from evolver.engine import EngineOptions, run_search
    from runners.extract import build_bundle
    from runners.extract import copy_reference
    from runners.sandbox import Evaluator

    spec = task_spec("qk_rms_norm", load_config(EXAMPLE).kernels["qk_rms_norm"], "interpret")
    assert [c.id for c in spec.cases] == ["T=3,H=4,D=96/float16", "T=9,H=2,D=128/float16"]  # 12 and 18 rows
    bundle = tmp_path / "bundle"
    build_bundle(EXAMPLE, spec, bundle)
    copy_reference(EXAMPLE, bundle, spec.reference)
    phase = {"T=3,H=4,D=96/float16": "decode", "T=9,H=2,D=128/float16": "prefill"}
    sizes = {"T=3,H=4,D=96/float16": 12, "T=9,H=2,D=128/float16": 18}

    def config_of(cand: Candidate, case: str) -> tuple[int, int]:
        """The config the candidate runs at the case: its pin, its table's row, or the autotuner's usual pick."""
        table = next((v["table"] for k, v in cand.genome.items() if k.endswith("@autotune.choice")), None)
        label = next((configs.labels[v] for k, v in cand.genome.items() if k == configs.key), "")
        if table is not None:
            label = configs.labels[next(p for limit, p in table if limit is None or sizes[case] <= limit)]
        found = re.match(r"pin ROWS=(\d+), num_warps=(\d+)", label)
        return (int(found[1]), int(found[2])) if found else (8, 8)

    evaluated = []
    with Evaluator(bundle, "interpret", timeout=120, trials=1) as evaluator:
        configs = next(k for k in LaunchTuner(evaluator.baseline, entry="qk_rms_norm").knobs if k.name == "configs")

        def replay(cand: Candidate) -> Evaluation:
            ev = evaluator.evaluate(cand.source, random.randrange(1 << 62), protocol="search")
            evaluated.append((cand.genome, ev.ok))
            if ev.ok:
                for case in ev.cases:
                    case.baseline_us = H200_US[phase[case.case]][(8, 8)]
                    case.candidate_us = H200_US[phase[case.case]][config_of(cand, case.case)]
                ev.timed = True
            return ev

        baseline = Candidate(0, evaluator.baseline, "baseline")
        baseline.evaluation = replay(baseline)
        (tmp_path / "run").mkdir()
        engine = run_search(evaluator, baseline, EngineOptions(budget=5), tmp_path / "run", 0, evaluate=replay)
        engine.store.close()
    assert all(ok for _, ok in evaluated), evaluated
    [choice] = [c for c in engine.archive.candidates if "_qk_rms_norm_kernel@autotune.choice" in c.genome]
    assert choice.correct and len(engine.archive.candidates) == 6
    # 12 rows (bucket 4): one row per program, fastest at decode; 18 rows (bucket 5): ROWS=64/8 warps of the two
    # pins timed (farthest-first: ROWS=1/1 warp and ROWS=64/8 warps), faster at prefill
    assert engine.describer.describe(choice.genome) == [
        "_qk_rms_norm_kernel (line 25): autotune config chosen by n_rows: n_rows <= 15: ROWS=1, num_warps=1; "
        "above: ROWS=64, num_warps=8 (key ['D', 'n_rows_bucket'])"]
    assert engine.archive.best() is choice


def test_sizes_are_read_from_the_launchers_assignments_or_as_the_rows_of_the_input():
    from evolver.kernel_sizes import case_sizes
    from evolver.launch_params import autotuned_kernels
    from runners.syntax import parse

    launcher = SYNTH.replace('''    y = torch.empty_like(x)
    n = x.shape[1]
    _double[lambda meta: (triton.cdiv(x.shape[0], meta["R"]),)](x, y, x.shape[0], n,''', '''    y = torch.empty_like(x)
    t, h, n = x.shape
    flat = x.view(-1, n).contiguous()
    rows = flat.size(0) if residual is None else t  # (not a row count: only to tell the branches apart)
    _double[lambda meta: (triton.cdiv(rows, meta["R"]),)](flat, y, rows, n,''').replace(
        "def double(x):", "def double(x, residual=None):")
    assert launcher != SYNTH
    spec = TaskSpec(kernel="double", module="d.py", entry="double",
                    args=[ArgSpec("x", ["T", "H", "N"]), ArgSpec("residual", ["T", "H", "N"], when="residual")],
                    cases=[Case({"T": 5, "H": 3, "N": 64}, "float32"),
                           Case({"T": 7, "H": 2, "N": 32, "residual": True}, "float32")])
    tree = parse(launcher)
    [tuned] = autotuned_kernels(tree, launcher, "double")
    sizes = case_sizes(tree, "double", tuned.fn, tuned.sites, "M", spec)
    assert {k: v.value for k, v in sizes.items()} == {"T=5,H=3,N=64/float32": 15,
                                                        "T=7,H=2,N=32,residual/float32": 7}
    assert all(v.how == "the launch's `rows` at the cases' shapes" for v in sizes.values())
    # a helper of another module reshapes the input: the rows of the first tensor of two or more dimensions
    helper = launcher.replace("flat = x.view(-1, n).contiguous()", "flat = as_rows(x)").replace(
        "rows = flat.size(0) if residual is None else t  # (not a row count: only to tell the branches apart)",
        "rows = flat.shape[0]")
    tree = parse(helper)
    [tuned] = autotuned_kernels(tree, helper, "double")
    sizes = case_sizes(tree, "double", tuned.fn, tuned.sites, "M", spec)
    assert sizes["T=5,H=3,N=64/float32"].value == 15
    assert sizes["T=5,H=3,N=64/float32"].how == "`rows` read as the rows of x, every dimension but the last"


def test_configs_built_at_run_time_are_chosen_by_position(tmp_path):
    built = SYNTH.replace('''@triton.autotune(
    configs=[triton.Config({"R": 1}, num_warps=1), triton.Config({"R": 4}, num_warps=2),
             triton.Config({"R": 16}, num_warps=4)],''', '''def make_configs():
    return [triton.Config({"R": r}, num_warps=w) for r, w in ((1, 1), (4, 2), (16, 4))]


@triton.autotune(
    configs=make_configs(),''')
    assert built != SYNTH
    tuner = LaunchTuner(built, entry="double", spec=SYNTH_SPEC)
    ids = [c.id for c in SYNTH_SPEC.cases]
    archive = archive_of(tuner, ("config #0 of `make_configs()`", dict(zip(ids, (1.0, 2.0, 90.0)))),
                         ("config #2 of `make_configs()`", dict(zip(ids, (1.3, 1.6, 20.0)))))
    cand = tuner.propose(archive, random.Random(0))
    assert tuner.describe(cand.genome) == [
        "_double (line 15): autotune config chosen by M: M <= 15: config #0 of `make_configs()`; above: config #2 of "
        "`make_configs()` (key ['N', 'M_bucket'])"]
    assert "    (15, 0),\n    (None, 2),\n]" in cand.source and "return configs[want:want + 1] or configs" in cand.source
    assert check_source(cand.source, built, "double") == []
    module = load(tmp_path, cand.source, "double")
    for rows, want in ((3, 1), (40, 16)):
        x = torch.randn(rows, 48)
        torch.testing.assert_close(module.double(x), x * 2)
        assert module._double.best_config.kwargs == {"R": want}, rows


# A row-parallel kernel whose row count reaches it only through the grid (the layout of Liger-Kernel's DyT
# forward): no argument is free to add to the key, so the launch passes a new one, the row count's power of two.
GRID_ONLY = '''\
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_N": 16}, num_warps=1), triton.Config({"BLOCK_N": 32}, num_warps=4)],
                 key=["N"])
@triton.jit
def _scale_rows(X, Y, N: tl.constexpr, BLOCK_N: tl.constexpr):
    col = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row = tl.program_id(1).to(tl.int64)
    x = tl.load(X + row * N + col, mask=col < N, other=0.0)
    tl.store(Y + row * N + col, x * 3, mask=col < N)


def scale_rows(x):
    shape = x.shape
    x = x.view(-1, shape[-1])
    M, N = x.shape
    y = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), M)  # noqa: E731
    _scale_rows[grid](x, y, N)
    return y.view(shape)
'''


def test_a_size_only_the_grid_uses_becomes_a_bucket_the_launch_passes(tmp_path):
    spec = TaskSpec(kernel="scale_rows", module="s.py", entry="scale_rows", args=[ArgSpec("x", ["B", "T", "H"])],
                    cases=[Case({"B": 1, "T": 1, "H": 64}, "float32"), Case({"B": 2, "T": 4096, "H": 64}, "float32")])
    tuner = LaunchTuner(GRID_ONLY, entry="scale_rows", spec=spec)
    assert not [k for k in tuner.knobs if k.name == "key"]  # no scalar argument to re-key on
    ids = [c.id for c in spec.cases]  # 1 row and 8192 rows
    archive = archive_of(tuner, ("BLOCK_N=16, num_warps=1", dict(zip(ids, (1.0, 50.0)))),
                         ("BLOCK_N=32, num_warps=4", dict(zip(ids, (1.4, 20.0)))))
    cand = tuner.propose(archive, random.Random(0))
    assert tuner.describe(cand.genome) == [
        "_scale_rows (line 9): autotune config chosen by M: M <= 127: BLOCK_N=16, num_warps=1; above: BLOCK_N=32, "
        "num_warps=4 (key ['N', 'M_bucket'])"]
    assert "def _scale_rows(X, Y, N: tl.constexpr, BLOCK_N: tl.constexpr, M_bucket=0):" in cand.source
    assert "_scale_rows[grid](x, y, N, M_bucket=int(M).bit_length())" in cand.source
    assert "the launch's `M` at the cases' shapes" in " ".join(line.lstrip("# ") for line in cand.source.splitlines())
    assert "the launch passes M_bucket=int(M).bit_length(), its power of two." in cand.source.replace("\n# ", " ")
    assert check_source(cand.source, GRID_ONLY, "scale_rows") == []
    module = load(tmp_path, cand.source, "scale_rows")
    for rows, want in ((3, 16), (127, 16), (128, 32)):
        x = torch.randn(1, rows, 40)
        torch.testing.assert_close(module.scale_rows(x), x * 3)
        assert module._scale_rows.best_config.kwargs == {"BLOCK_N": want}, rows
