"""Problems a real repository brought that kernelsmith's own examples did not (FlagGems, lightllm), each as a
small repository on disk: package re-exports through `import *`, benchmark scripts named like tests, a test
option with a value, tests that hard-code `device="cuda"` run on the CPU interpreter, a capture run that cannot
record anything, and a long test file cut short when only a proposal is wanted."""
import sys

import git
import yaml
from conftest import commit_all
from typer.testing import CliRunner

from bot.capture import run_capture
from bot.cli import app
from bot.repo_tests import TestSettings, parse_test
from bot.scan import scan
from bot.target import open_target

KERNEL = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


def scale_(x, alpha=2.0):
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 64),)](x, n, alpha, BLOCK=64)
    return x
'''

# as lightllm's unit tests: the device is hard-coded, and the GPU is synchronised
TEST = '''\
import pytest
import torch

import gems


@pytest.mark.parametrize("n", [3, 70, 130, 200, 260])
def test_scale(n):
    x = torch.randn(n, device="cuda")
    want = x * 2.0
    gems.scale_(x)
    torch.cuda.synchronize()
    assert torch.allclose(x, want)
    assert torch.ones(2).cuda().device == x.device
'''


def make_repo(tmp_path, test=TEST, init_extra=""):
    """FlagGems' layout: src/gems/__init__.py re-exports its ops with `from gems.ops import *`."""
    root = tmp_path / "gems-repo"
    (root / "src/gems/ops").mkdir(parents=True)
    (root / "src/gems/__init__.py").write_text(f"{init_extra}from gems.ops import *  # noqa: F403\n")
    (root / "src/gems/ops/__init__.py").write_text("from gems.ops.scale import scale_\n\n__all__ = ['scale_']\n")
    (root / "src/gems/ops/scale.py").write_text(KERNEL)
    (root / "tests").mkdir()
    (root / "tests/test_scale.py").write_text(test)
    (root / "benchmark").mkdir()
    (root / "benchmark/test_ops_perf.py").write_text("import torch\nimport gems\n\n\ndef test_perf():\n"
                                                    "    gems.scale_(torch.randn(4096))\n")
    (root / "pytest.ini").write_text("[pytest]\npythonpath = src\n")
    commit_all(git.Repo.init(root, initial_branch="main"), "baseline")
    return root


def test_entries_re_exported_with_import_star_are_reached_and_benchmarks_come_last(tmp_path):
    root = make_repo(tmp_path)
    (root / "modules_tests").mkdir()  # a second tree of tests, outside the canonical `tests/`
    (root / "modules_tests/test_modules.py").write_text("import gems\n\n\ndef test_it():\n    gems.scale_\n")
    [row] = scan(root)
    assert row.entry == "src/gems/ops/scale.py:scale_"
    # the perf script reaches it too, but checks nothing
    assert row.tests == ["tests/test_scale.py", "modules_tests/test_modules.py", "benchmark/test_ops_perf.py"]


def test_a_repository_option_with_a_value_is_not_taken_for_a_path():
    test = parse_test("tests/test_norm_ops.py -k fused_add_rms_norm --mode quick")
    assert test.paths == ("tests/test_norm_ops.py",)
    assert parse_test("--ref cpu tests/test_a.py tests").paths == ("tests/test_a.py", "tests")
    assert parse_test("pytest tests/a.py --mode=quick tests/b.py::TestB").paths == ("tests/a.py", "tests/b.py")


def test_tests_that_hard_code_cuda_run_on_the_cpu_interpreter_and_are_counted(tmp_path):
    target = open_target(make_repo(tmp_path))
    target.tests = TestSettings(import_roots=["src"])
    capture = run_capture(target, "tests/test_scale.py", "gems.ops.scale", "scale_", "interpret")
    assert capture.run.passed, capture.run.output_tail
    assert [c["args"]["x"]["shape"] for c in capture.calls] == [[3], [70], [130], [200], [260]]
    assert all(c["args"]["x"]["device"] == "cpu" and c["written"] == ["x"] for c in capture.calls)
    assert capture.cuda_moved == 10  # five `device="cuda"` and five `.cuda()`
    assert capture.run.command == "python -m pytest -q -p no:cacheprovider tests/test_scale.py"  # no plugin shown


def test_a_proposal_needs_calls_not_a_pass_so_the_run_stops_early(tmp_path):
    target = open_target(make_repo(tmp_path))
    target.tests = TestSettings(import_roots=["src"])
    capture = run_capture(target, "tests/test_scale.py", "gems.ops.scale", "scale_", "interpret", stop_after=2)
    assert len(capture.calls) == 2 and "kernelsmith: 2 calls recorded" in capture.run.output_tail


def test_init_says_why_the_capture_recorded_nothing_and_keeps_the_python(tmp_path):
    root = make_repo(tmp_path, init_extra="import not_installed_engine_dep  # noqa: F401\n")
    out = tmp_path / "proposal.yml"
    result = CliRunner().invoke(app, ["init", str(root), "--capture", "--backend", "interpret", "--python",
                                      sys.executable, "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "scale_: REVIEW the capture run of tests/test_scale.py recorded no call of scale_" in text
    assert "ModuleNotFoundError: No module named 'not_installed_engine_dep'" in text
    assert yaml.safe_load(text)["python"] == sys.executable


def test_a_device_probe_that_raises_through_a_helper_is_named_where_it_probes(tmp_path):
    """FlagGems: the package's device detection calls ``error.device_not_found()``, whose only line raises."""
    import pytest

    from bot.config import parse_config
    from bot.errors import UserError
    from bot.kernel_checks import check_import
    from runners.extract import extraction_plan

    root = make_repo(tmp_path, init_extra="from gems.runtime import device  # noqa: F401\n")
    (root / "src/gems/runtime").mkdir()
    (root / "src/gems/runtime/__init__.py").write_text("")
    (root / "src/gems/runtime/error.py").write_text(
        "def device_not_found():\n    raise RuntimeError('No device were detected on your machine')\n")
    (root / "src/gems/runtime/device.py").write_text(
        "from gems.runtime import error\n\n\ndef detect():\n    error.device_not_found()\n\n\nVENDOR = detect()\n")
    (root / "src/gems/ops/scale.py").write_text("from gems.runtime import device  # noqa: F401\n" + KERNEL)
    kernel = parse_config("kernels:\n  scale:\n    path: src/gems/ops/scale.py\n    entry: scale_\n"
                          "    test: tests/test_scale.py\n    args: {x: {shape: [N]}}\n    shapes: [{N: 8}]\n"
                          ).kernels["scale"]
    plan = extraction_plan(root, kernel.path, kernel.entry)
    with pytest.raises(UserError) as err:
        check_import(root, "scale", kernel, plan, "interpret", None, [str(root / "src")])
    assert err.value.cause.startswith("src/gems/runtime/device.py line 5 (`error.device_not_found()`) queries the GPU")
    assert "reached from src/gems/ops/scale.py line 1" in err.value.cause


NORM = '''\
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _row_scale_kernel(x_ptr, w_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (x * w).to(y_ptr.dtype.element_ty), mask=mask)


def row_scale(x, normalized_shape, weight):
    """As FlagGems' norms: the normalised dimensions come as a list of sizes."""
    N = math.prod(normalized_shape)
    M = x.numel() // N
    y = torch.empty_like(x)
    _row_scale_kernel[(M,)](x, weight, y, N, BLOCK=triton.next_power_of_2(N))
    return y
'''

NORM_TEST = '''\
import pytest
import torch

import gems


@pytest.mark.parametrize("shape", [(3, 40), (5, 64)])
def test_row_scale(shape):
    x = torch.randn(shape, device="cuda", dtype=torch.float16)
    w = torch.randn(shape[-1], device="cuda", dtype=torch.float16)
    torch.testing.assert_close(gems.row_scale(x, [shape[-1]], w), x * w, atol=2e-3, rtol=2e-3)
'''

NORM_CONFIG = '''\
version: 1
kernels:
  row_scale:
    path: src/gems/ops/row_scale.py
    entry: row_scale
    test: tests/test_row_scale.py
    dtypes: [float16]
    args:
      x: {shape: [T, H]}
      normalized_shape: {size: [H]}
      weight: {shape: [H]}
    shapes: [{T: 1, H: 4096}]
    smoke_shapes: [{T: 2, H: 128}]
'''


def test_a_list_of_sizes_argument_follows_the_shape_symbols_end_to_end(tmp_path):
    """FlagGems' `normalized_shape`: `size: [H]` gives [128] in the configured case and [40], [64] in the captured
    ones; the whole job runs on the CPU from tests written for a GPU, through the package's `import *`."""
    from bot.optimize import OptimizeOptions, optimize

    root = make_repo(tmp_path)
    (root / "src/gems/ops/row_scale.py").write_text(NORM)
    (root / "src/gems/ops/__init__.py").write_text("from gems.ops.scale import scale_\n"
                                                   "from gems.ops.row_scale import row_scale\n")
    (root / "tests/test_row_scale.py").write_text(NORM_TEST)
    (root / ".github").mkdir()
    (root / ".github/kernelsmith.yml").write_text(NORM_CONFIG)
    commit_all(git.Repo(root), "row_scale")
    result = optimize(OptimizeOptions(target=root, kernel="row_scale", out=tmp_path / "run", budget=1,
                                      backend="interpret", timeout=240, trials=1))
    assert result.verdict == "not_timed"
    task = yaml.safe_load((tmp_path / "run/bundle/task.yaml").read_text())
    assert {(c["origin"], tuple(c["values"]["normalized_shape"])) for c in task["cases"]} == {
        ("config", (128,)), ("captured", (40,)), ("captured", (64,))}
    assert all(row["correct"] for row in result.report["cases"]) and len(result.report["cases"]) == 3
    assert result.report["capture"]["cuda_moved"] == 4 and result.report["capture"]["kept"] == 2
    assert "called the entry 2 times" in (tmp_path / "run/report.md").read_text()


def test_size_arguments_are_checked_and_captured_calls_must_agree():
    import pytest

    from bot.capture import to_case
    from bot.config import parse_config
    from bot.errors import UserError

    head = "kernels:\n  k:\n    path: a.py\n    entry: f\n    test: tests/t.py\n    shapes: [{T: 1, H: 64}]\n"
    kernel = parse_config(head + "    args: {x: {shape: [T, H]}, ns: {size: [H]}, n: {size: '2*H'}}\n").kernels["k"]
    x = {"kind": "tensor", "shape": [3, 32], "dtype": "float16", "stride": [32, 1], "contiguous": True}
    case, _ = to_case({"args": {"x": x, "ns": {"kind": "scalar", "value": [32]},
                                "n": {"kind": "scalar", "value": 64}}}, kernel)
    assert case.values == {"ns": [32], "n": 64} and case.symbols == {"T": 3, "H": 32}
    case, why = to_case({"args": {"x": x, "ns": {"kind": "scalar", "value": [16]},
                                  "n": {"kind": "scalar", "value": 64}}}, kernel)
    assert case is None and why == "argument `ns` was [16], the config's size gives [32]"
    with pytest.raises(UserError) as err:
        parse_config(head + "    args: {x: {shape: [T, H]}, ns: {size: [H], value: [3]}}\n")
    assert "line 7 (kernels.k.args.ns)" in err.value.cause and "not value and size" in err.value.cause
    with pytest.raises(UserError) as err:
        parse_config(head + "    args: {x: {shape: [T, H]}, ns: {size: [D]}}\n")
    assert "argument `ns`" in err.value.cause and "'D'" in err.value.cause


def test_autograd_functions_and_decorator_launchers_get_entries(tmp_path):
    """FlagGems: `cross_entropy_loss` returns `CrossEntropyLoss.apply(...)`, whose backward launches kernels of
    its own; pointwise ops are `@pointwise_dynamic @triton.jit` functions called like functions."""
    root = tmp_path / "r"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/ce.py").write_text(
        "import torch\nimport triton\n\nfrom pkg.codegen import pointwise_dynamic\n\n\n"
        "@triton.jit\ndef _fwd(x_ptr):\n    pass\n\n\n@triton.jit\ndef _bwd(x_ptr):\n    pass\n\n\n"
        "@triton.jit\ndef _helper(x):\n    return x\n\n\n"
        "@pointwise_dynamic(is_tensor=[True])\n@triton.jit\ndef add_func(x):\n    return _helper(x) + 1\n\n\n"
        "class CrossEntropy(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        _fwd[(1,)](x)\n        return x\n\n    @staticmethod\n    def backward(ctx, g):\n"
        "        _bwd[(1,)](g)\n        return g\n\n\n"
        "def cross_entropy(x):\n    return CrossEntropy.apply(x)\n\n\n"
        "def add_one(x):\n    return add_func(x)\n")
    (root / "pkg/codegen.py").write_text("def pointwise_dynamic(**kw):\n    return lambda f: f\n")
    rows = {r.kernel: r for r in scan(root)}
    assert rows["_fwd"].entry == "pkg/ce.py:cross_entropy" and not any("method" in m for m in rows["_fwd"].missing)
    assert rows["_bwd"].entry is None and "reached only through autograd's backward pass" in rows["_bwd"].missing[0]
    assert rows["add_func"].entry == "pkg/ce.py:add_one"
    assert any("@pointwise_dynamic, which makes the launch itself" in m for m in rows["add_func"].missing)
    assert "never launched" in rows["_helper"].missing[0]  # called inside a kernel: a device function


def test_an_integer_range_stays_integer():
    """lightllm's `max_seq_len` goes into `triton.cdiv` for the grid: a float there fails the launch."""
    from bot.config import parse_config, task_spec

    kernel = parse_config("kernels:\n  k:\n    path: a.py\n    entry: f\n    test: tests/t.py\n"
                          "    args: {x: {shape: [N]}, max_seq_len: {range: [16, 2048]}, eps: {range: [1.0e-6, 1]}}\n"
                          "    shapes: [{N: 8}]\n").kernels["k"]
    args = {a.name: a for a in task_spec("k", kernel, "interpret").args}
    assert args["max_seq_len"].range == [16, 2048] and all(type(v) is int for v in args["max_seq_len"].range)
    assert type(args["eps"].range[0]) is float


def test_a_baseline_failure_with_integer_tensors_names_them():
    """lightllm's repack_kv_index: lengths, offsets summed from them and request indices must agree; random
    values in `low`..`high` make the unmodified kernel write out of bounds."""
    from bot.optimize import _index_hint
    from runners.task import ArgSpec, TaskSpec

    args = [ArgSpec("kv_index", shape=["T", "H"], dtype="int32"), ArgSpec("seq_len", shape=["I"], dtype="int32"),
            ArgSpec("x", shape=["T"]), ArgSpec("max_seq_len", range=[16, 2048])]
    hint = _index_hint(TaskSpec(kernel="k", module="m.py", entry="f", args=args, cases=[]))
    assert "The integer tensors `kv_index`, `seq_len` get random values" in hint and "`x`" not in hint
    assert _index_hint(TaskSpec(kernel="k", module="m.py", entry="f", args=args[2:], cases=[])) == ""


def test_captured_cases_zero_keeps_none_but_still_counts():
    from bot.capture import captured_cases
    from bot.config import parse_config

    kernel = parse_config("kernels:\n  k:\n    path: a.py\n    entry: f\n    test: tests/t.py\n"
                          "    captured_cases: 0\n    args: {x: {shape: [N]}}\n    shapes: [{N: 8}]\n").kernels["k"]
    calls = [{"args": {"x": {"kind": "tensor", "shape": [n], "dtype": "float16", "stride": [1],
                             "contiguous": True}}} for n in (3, 5, 7)]
    cases, summary = captured_cases(calls, kernel, "interpret", kernel.captured_cases, [])
    assert cases == [] and summary["calls"] == 3 and summary["distinct"] == 3 and summary["kept"] == 0


def test_init_proposes_size_for_a_list_of_sizes_that_follows_the_tensors():
    from bot.config import parse_config
    from bot.init_config import from_calls, render
    from bot.scan import ScanRow

    def call(t, h, n_groups):
        tensor = {"kind": "tensor", "dtype": "float16", "contiguous": True}
        return {"args": {"x": {**tensor, "shape": [t, h]}, "w": {**tensor, "shape": [h]},
                         "normalized_shape": {"kind": "scalar", "value": [h]},
                         "rows": {"kind": "scalar", "value": t}, "groups": {"kind": "scalar", "value": n_groups}}}

    row = ScanRow(kernel="_k", file="src/gems/ops/norm.py", line=1, autotuned=False,
                  entry="src/gems/ops/norm.py:norm", tests=["tests/test_norm.py"])
    prop = from_calls(row, [call(1, 64, 2), call(7, 96, 4), call(33, 128, 2)])
    assert prop.args["normalized_shape"] == {"size": ["H"]} and prop.args["rows"] == {"size": "T"}
    assert prop.args["groups"] == {"value": 2}  # varies with no tensor size: the usual one (a range would give 3)
    config = parse_config(render([prop]))
    assert config.kernels["norm"].args["normalized_shape"].size == ["H"]


def test_init_names_entries_of_the_same_name_after_their_files(tmp_path):
    """FlagGems: `scan_then_fan_col` in cummax.py and cummin.py, `slice_scatter` again in a vendor's folder."""
    from bot.init_config import proposals

    root = tmp_path / "r"
    for rel in ("pkg/cummax.py", "pkg/cummin.py", "pkg/_vendor/cummin.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(KERNEL.replace("def scale_", "def scan_then_fan_col"))
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/_vendor/__init__.py").write_text("")
    (root / "tests").mkdir()
    (root / "tests/test_cum.py").write_text(
        "from pkg.cummax import scan_then_fan_col as a\nfrom pkg.cummin import scan_then_fan_col as b\n"
        "from pkg._vendor.cummin import scan_then_fan_col as c\n\n\ndef test_all():\n    a, b, c\n")
    names = {p.path: p.name for p in proposals(root)}
    assert names == {"pkg/cummax.py": "scan_then_fan_col", "pkg/cummin.py": "cummin_scan_then_fan_col",
                     "pkg/_vendor/cummin.py": "vendor_cummin_scan_then_fan_col"}


RUNTIME_AUTOTUNED = '''\
import triton
import triton.language as tl


def _hook(nargs):
    pass


def get_tuned_config(name):  # FlagGems reads these from a YAML file; Liger passes pre_hook=
    return [triton.Config({"BLOCK": b}, num_warps=w, pre_hook=_hook) for b in (32, 64) for w in (1, 2)]


@triton.autotune(configs=get_tuned_config("scale"), key=["n"])
@triton.jit
def _scale_kernel(x_ptr, n, rows, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def scale_(x):
    _scale_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, x.numel(), x.shape[0])
    return x
'''


def test_configs_built_at_run_time_are_pinned_by_position():
    """FlagGems (`runtime.get_tuned_config(...)`, 44 of 48 autotuned entries) and Liger (`pre_hook=`) build their
    configs when the module runs; they got no knob at all. Now each position is a pin, and the key is free."""
    import torch

    from evolver.launch_params import find_knobs, render

    configs, key = find_knobs(RUNTIME_AUTOTUNED, "scale_")
    assert (configs.name, key.name) == ("configs", "key") and len(configs.choices) == 9
    assert configs.labels[2] == 'pin config #1 of `get_tuned_config("scale")`'
    assert key.labels[1:] == ("['n', 'rows_bucket'] (re-tune per power of two of rows)",
                              "['n', 'rows'] (re-tune per value of rows)")
    for choice, want, rekey, keys in ((2, [(64 // 2, 2)], 2, ["n", "rows"]),
                                      (8, [(32, 1), (32, 2), (64, 1), (64, 2)], 2, ["n", "rows"]),  # #7: fewer
                                      (2, [(64 // 2, 2)], 1, ["n", "rows_bucket"])):  # the launch passes the bucket
        namespace: dict = {}
        exec(compile(render(RUNTIME_AUTOTUNED, [configs, key], {configs.key: choice, key.key: rekey}, "scale_"),
                     "scaled.py", "exec"), namespace)
        tuner = namespace["_scale_kernel"]
        assert [(c.kwargs["BLOCK"], c.num_warps) for c in tuner.configs] == want and tuner.keys == keys
        assert keys[-1] in tuner.arg_names
        if len(want) == 1:  # one config: no benchmarking, so it runs on the interpreter too
            assert torch.equal(namespace["scale_"](torch.ones(100)), torch.full((100,), 2.0))


def test_init_without_capture_takes_a_shape_parameter_for_sizes(tmp_path):
    from bot.config import parse_config
    from bot.init_config import proposals, render

    root = make_repo(tmp_path)
    (root / "src/gems/ops/row_scale.py").write_text(NORM)
    (root / "src/gems/ops/__init__.py").write_text("from gems.ops.row_scale import row_scale\n")
    (root / "tests/test_row_scale.py").write_text(NORM_TEST)
    [prop] = proposals(root, only=["row_scale"])
    assert prop.args["normalized_shape"] == {"size": ["H"]} and prop.args["x"] == {"shape": ["T", "H"]}
    assert "`normalized_shape` is taken for a list of sizes" in prop.review[0]
    parse_config(render([prop]))
