"""Problems SGLang (0.5.10, `python/sglang/srt/layers/...`, tests in `test/srt/`) brought, each as a small
repository on disk: packages without an `__init__.py` between the top package and the kernel's (implicit
namespace packages), helper modules of a test package that reach half the engine, unittest classes that skip
without `torch.cuda.is_available()` and then `torch.set_default_device("cuda")`, and a collection error hidden
behind an engine's warnings summary."""
import git
from conftest import commit_all

from bot.capture import run_capture
from bot.repo_tests import TestSettings, output_tail
from bot.scan import scan
from bot.target import open_target
from runners.extract import extraction_plan, import_root

KERNEL = '''\
import torch
import triton
import triton.language as tl

from engine.srt.utils import block_for


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


def scale(x, alpha=2.0):
    y = torch.empty_like(x)
    n = x.numel()
    block = block_for(n)
    _scale_kernel[(triton.cdiv(n, block),)](x, y, n, alpha, BLOCK=block)
    return y
'''

LAYER = '''\
from engine.srt.layers.quant.scaled import scale


def apply_layer(x):
    assert x.is_cuda, "the layer runs on CUDA only"  # as SGLang's diffusion kernels check their inputs
    return scale(x, 2.0)
'''

# as SGLang's test/srt/quant/*.py: a unittest class that skips without a GPU, then makes CUDA the default device
TEST = '''\
import unittest

import torch

from engine.srt.layers.linear import apply_layer


class TestLinearLayer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not torch.cuda.is_available():
            raise unittest.SkipTest("CUDA is not available")
        torch.set_default_device("cuda")

    def test_layer(self):
        for n in (5, 70, 130):
            x = torch.randn(n)
            torch.testing.assert_close(apply_layer(x), x * 2.0)
'''


def make_repo(tmp_path):
    """SGLang's layout: python/engine/__init__.py, no __init__.py in srt/ nor srt/layers/, one in
    srt/layers/quant/; tests in a separate tree and helper modules in the package's own test/ folder."""
    root = tmp_path / "engine-repo"
    quant = root / "python/engine/srt/layers/quant"
    quant.mkdir(parents=True)
    (root / "python/engine/__init__.py").write_text("")
    (quant / "__init__.py").write_text("")
    (quant / "scaled.py").write_text(KERNEL)
    (root / "python/engine/srt/utils.py").write_text("def block_for(n):\n    return 64 if n <= 64 else 128\n")
    (root / "python/engine/srt/layers/linear.py").write_text(LAYER)
    (root / "test/srt").mkdir(parents=True)
    (root / "test/srt/test_linear_layer.py").write_text(TEST)
    # a helper of the tests, shallower than the test itself, that reaches the kernel too (SGLang's runners.py)
    (root / "test/runners.py").write_text("from engine.srt.layers.linear import apply_layer\n\n\n"
                                          "def run(x):\n    return apply_layer(x)\n")
    commit_all(git.Repo.init(root, initial_branch="main"), "baseline")
    return root


def test_the_import_root_spans_folders_without_an_init_file(tmp_path):
    root = make_repo(tmp_path)
    assert import_root(root, "python/engine/srt/layers/quant/scaled.py") == (
        "python", "engine", "engine.srt.layers.quant.scaled")
    assert import_root(root, "python/engine/srt/utils.py") == ("python", "engine", "engine.srt.utils")
    assert import_root(root, "test/srt/test_linear_layer.py") == ("test/srt", None, "test_linear_layer")
    plan = extraction_plan(root, "python/engine/srt/layers/quant/scaled.py", "scale")
    assert plan.import_root == "python" and plan.package == "engine"


def test_scan_reaches_the_kernel_through_namespace_packages_and_ranks_real_tests_before_helpers(tmp_path):
    [row] = scan(make_repo(tmp_path))
    assert row.entry == "python/engine/srt/layers/quant/scaled.py:scale"
    assert row.tests == ["test/srt/test_linear_layer.py", "test/runners.py"]


def test_tests_that_skip_without_a_gpu_run_on_the_cpu_dry_run(tmp_path):
    """...and `x.is_cuda` is true of a tensor the dry run made on the CPU for `cuda`."""
    target = open_target(make_repo(tmp_path))
    target.tests = TestSettings(import_roots=["python"])
    capture = run_capture(target, "test/srt/test_linear_layer.py", "engine.srt.layers.quant.scaled", "scale",
                          "interpret")
    assert capture.run.passed, capture.run.output_tail
    assert "skipped" not in capture.run.output_tail
    assert [c["args"]["x"]["shape"] for c in capture.calls] == [[5], [70], [130]]
    assert all(c["args"]["x"]["device"] == "cpu" for c in capture.calls)


def test_the_error_that_stopped_collection_survives_a_long_warnings_summary():
    output = "\n".join(["==== ERRORS ====", "ImportError while importing test module 'test/srt/test_a.py'.",
                        "E   ModuleNotFoundError: No module named 'einops'", "==== warnings summary ===="]
                       + [f"  warning {i}" for i in range(30)] + ["1 error in 3.0s"])
    tail = output_tail(output)
    assert tail.splitlines()[0] == "E   ModuleNotFoundError: No module named 'einops'"
    assert tail.splitlines()[-1] == "1 error in 3.0s"
    assert output_tail("a\nb") == "a\nb"


def test_a_parameter_without_a_default_missing_from_args_is_named_before_anything_runs(tmp_path):
    """SGLang's ``triton_scaled_mm(input, weight, scale_a, scale_b, out_dtype, bias=None, ...)``: a config
    without ``out_dtype`` failed at the baseline check with a TypeError, after ``--out`` was written."""
    import pytest

    from bot.config import parse_config
    from bot.errors import UserError
    from bot.kernel_checks import check_arguments

    root = make_repo(tmp_path)
    (root / "python/engine/srt/layers/quant/scaled.py").write_text(
        KERNEL.replace("def scale(x, alpha=2.0):", "def scale(x, out_dtype, alpha=2.0, *, keep=None):"))

    def kernel(args: str):
        return parse_config("kernels:\n  scale:\n    path: python/engine/srt/layers/quant/scaled.py\n"
                            "    entry: scale\n    test: test/srt/test_linear_layer.py\n"
                            f"    args: {args}\n    shapes: [{{N: 8}}]\n").kernels["scale"]

    check_arguments(root, "scale", kernel("{x: {shape: [N]}, out_dtype: {value: 1}}"))
    with pytest.raises(UserError) as missing:
        check_arguments(root, "scale", kernel("{x: {shape: [N]}, alpha: {value: 3.0}}"))
    assert "`scale` (python/engine/srt/layers/quant/scaled.py line 15) takes `out_dtype` without a default" \
        in str(missing.value)
    assert "Add `out_dtype:` under `args:`" in missing.value.fix
    with pytest.raises(UserError) as unknown:
        check_arguments(root, "scale", kernel("{x: {shape: [N]}, out_dtype: {value: 1}, alpah: {value: 3.0}}"))
    assert "has no parameter `alpah`" in str(unknown.value) and "did you mean `alpha`?" in unknown.value.fix


FLA_UTILS = '''\
import triton
import torch

# flash-linear-attention's device detection (SGLang vendors it as srt/layers/attention/fla/utils.py)
device = triton.runtime.driver.active.get_current_target().backend
device_torch_lib = getattr(torch, device)


def custom_device_ctx(index):
    return device_torch_lib.device(index)
'''


def test_a_device_context_taken_from_triton_s_driver_works_on_the_cpu_dry_run(tmp_path):
    root = make_repo(tmp_path)
    (root / "python/engine/srt/fla_utils.py").write_text(FLA_UTILS)
    (root / "python/engine/srt/layers/linear.py").write_text(
        "from engine.srt.fla_utils import custom_device_ctx\n" + LAYER.replace(
            "    return scale(x, 2.0)", "    with custom_device_ctx(0):\n        return scale(x, 2.0)"))
    commit_all(git.Repo(root), "fla-style device context")
    target = open_target(root)
    target.tests = TestSettings(import_roots=["python"])
    capture = run_capture(target, "test/srt/test_linear_layer.py", "engine.srt.layers.quant.scaled", "scale",
                          "interpret")
    assert capture.run.passed, capture.run.output_tail
    assert len(capture.calls) == 3


def test_a_test_whose_unchanged_kernel_the_interpreter_cannot_run_is_the_environment():
    from bot.kernel_checks import test_environment_fault

    output = ("E               triton.runtime.errors.InterpreterError: ValueError('Did you forget to add "
              "@triton.jit ? (`_semantic` argument must be provided outside of JIT functions.)')\n"
              "FAILED test/srt/test_gdn.py::test_mtp[1-1] - triton.runtime.errors.InterpreterError\n"
              "1 failed in 2.0s")
    fault = test_environment_fault(output, "interpret")
    assert fault.startswith("Triton's CPU interpreter cannot run a kernel that the test launches")
    assert "Did you forget to add @triton.jit" in fault and "test/srt/test_gdn.py::test_mtp[1-1]" in fault
    assert "the environment, not the kernel" in fault
    assert test_environment_fault(output, "triton") is None
    assert test_environment_fault("E   AssertionError: 3 != 4\nFAILED t.py::a", "interpret") is None


def test_extraction_follows_namespace_packages_and_leaves_type_checking_imports_alone(tmp_path):
    """SGLang's fp8_kernel.py: `from sglang.srt.layers import deep_gemm_wrapper` (a package inside a folder
    with no __init__.py), whose imports reach a module that names, under `if TYPE_CHECKING:`, a module the
    checkout lacks, and another behind `try: ... except ImportError`."""
    import pytest

    from runners.extract import ExtractionError

    root = make_repo(tmp_path)
    wrapper = root / "python/engine/srt/layers/gemm_wrapper"
    wrapper.mkdir()
    (wrapper / "__init__.py").write_text("from engine.srt.layers.gemm_wrapper import entrypoint  # noqa: F401\n")
    (wrapper / "entrypoint.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from engine.srt.not_in_this_release import X\n"
        "try:\n    from engine.srt.optional_backend import fast\nexcept ImportError:\n    fast = None\n\n\n"
        "def enabled():\n    return fast is not None\n")
    module = root / "python/engine/srt/layers/quant/scaled.py"
    module.write_text("from engine.srt.layers import gemm_wrapper\n" + KERNEL)
    plan = extraction_plan(root, "python/engine/srt/layers/quant/scaled.py", "scale")
    assert plan.files == ["python/engine/srt/layers/quant/scaled.py"]
    assert {"python/engine/srt/layers/gemm_wrapper/__init__.py", "python/engine/srt/layers/gemm_wrapper/entrypoint.py",
            "python/engine/srt/utils.py"} <= set(plan.host_files)
    module.write_text("from engine.srt.not_in_this_release import X\n" + KERNEL)  # the kernel's own import: named
    with pytest.raises(ExtractionError, match=r"scaled.py line 1: `from engine.srt.not_in_this_release import"):
        extraction_plan(root, "python/engine/srt/layers/quant/scaled.py", "scale")


def test_a_dtype_argument_is_proposed_captured_and_checked_as_torch_dtype(tmp_path):
    """SGLang's ``triton_scaled_mm(input, weight, scale_a, scale_b, out_dtype, ...)``: the tests pass
    ``out_dtype=torch.float16``; the config writes it ``torch.float16``."""
    import pytest

    from bot.capture import to_case
    from bot.config import parse_config
    from bot.errors import UserError
    from bot.init_config import from_calls, from_signature
    from bot.kernel_checks import check_dtype_values, workers_pass_dtypes
    from bot.scan import RepoIndex, ScanRow

    root = make_repo(tmp_path)
    rel = "python/engine/srt/layers/quant/scaled.py"
    (root / rel).write_text(KERNEL.replace("def scale(x, alpha=2.0):", "def scale(x, out_dtype, alpha=2.0):"))
    row = ScanRow(kernel="_scale_kernel", file=rel, line=9, autotuned=False, entry=f"{rel}:scale",
                  tests=["test/srt/test_a.py"])
    guessed = from_signature(RepoIndex(root), row)
    assert guessed.args["out_dtype"] == {"value": "torch.float16"}

    def call(n, dtype):
        return {"args": {"x": {"kind": "tensor", "shape": [n], "dtype": "float16", "stride": [1],
                               "contiguous": True, "offset": 0, "device": "cpu"},
                         "out_dtype": {"kind": "dtype", "value": dtype}}}

    calls = [call(8, "float16"), call(16, "float16"), call(32, "bfloat16")]
    proposed = from_calls(row, calls)
    assert proposed.args["out_dtype"] == {"value": "torch.float16"}
    assert any("`out_dtype` took 2 dtypes" in r for r in proposed.review)

    def kernel(value):
        return parse_config(f"kernels:\n  scale:\n    path: {rel}\n    entry: scale\n    test: test/srt/test_a.py\n"
                            f"    args: {{x: {{shape: [N]}}, out_dtype: {{value: {value}}}}}\n"
                            "    shapes: [{N: 8}]\n").kernels["scale"]

    case, why = to_case(calls[2], kernel("torch.float16"))
    assert why == "" and case.values == {"out_dtype": "torch.bfloat16"}
    assert to_case(calls[0], kernel("torch.float16"))[0].values == {}
    with pytest.raises(UserError, match=r"is the string 'float16', not a dtype") as bare:
        check_dtype_values(root, "scale", kernel("float16"))
    assert "Write `out_dtype: {value: torch.float16}`" in bare.value.fix
    if workers_pass_dtypes():
        check_dtype_values(root, "scale", kernel("torch.float16"))
    else:  # until runners/inputs.py turns `torch.float16` into the dtype, say so before anything runs
        with pytest.raises(UserError, match=r"asks for a torch.dtype argument"):
            check_dtype_values(root, "scale", kernel("torch.float16"))


def test_a_baseline_failure_inside_kernelsmith_s_own_evaluator_is_not_the_kernel_s():
    """SGLang's static_quant_fp8 returns a torch.float8_e4m3fn tensor; the workers' wire had no name for it, and
    the KeyError was reported as "Fix the kernel"."""
    from pathlib import Path

    import runners.wire
    from bot.kernel_checks import kernelsmith_fault

    wire = Path(runners.wire.__file__).resolve()
    error = ("Traceback (most recent call last):\n"
             '  File "/checkout/python/engine/srt/layers/quant/scaled.py", line 30, in scale\n'
             "    _scale_kernel[grid](x, y, n, alpha, BLOCK=block)\n"
             f'  File "{wire}", line 129, in write_tensor\n'
             '    meta = {"kind": "tensor", "dtype": DTYPE_NAMES[t.dtype]}\n'
             "KeyError: torch.float8_e4m3fn")
    fault = kernelsmith_fault(error)
    assert fault.startswith("kernelsmith's workers cannot carry a torch.float8_e4m3fn tensor")
    assert "(runners/wire.py line 129:" in fault and "a limit of kernelsmith, not of the kernel" in fault
    inside_the_kernel = error.replace(f'  File "{wire}", line 129, in write_tensor\n', "")
    assert kernelsmith_fault(inside_the_kernel) is None


def test_an_entry_that_asserts_its_inputs_are_on_cuda_is_the_environment_on_the_interpreter():
    """SGLang's fuse_layernorm_scale_shift_gate_select01_kernel starts with `assert x.is_cuda`: the judge's inputs
    on the interpreter are CPU tensors, so the baseline fails there, and that is not the kernel's fault."""
    from bot.kernel_checks import environment_fault

    rel = "python/engine/jit_kernel/diffusion/triton/scale_shift.py"
    error = ("Traceback (most recent call last):\n"
             f'  File "/tmp/bundle/baseline/{rel}", line 468, in fuse_kernel\n'
             "    assert x.is_cuda\nAssertionError")
    fault = environment_fault(error, "interpret", [rel])
    assert fault.startswith(f"the entry checks that its inputs are on a GPU ({rel} line 468: `assert x.is_cuda`)")
    assert "the environment, not the kernel" in fault
    assert environment_fault(error, "triton", [rel]) is None
    assert environment_fault(error.replace("x.is_cuda", "x.is_contiguous()"), "interpret", [rel]) is None


def test_init_fixes_float32_scales_beside_half_tensors_and_picks_the_usual_integer_dtype(tmp_path):
    """SGLang's test_triton_scaled_mm: int8 (and once fp8) `input`/`weight`, float32 `scale_a`, float16 `bias`."""
    from bot.init_config import from_calls
    from bot.scan import ScanRow

    def tensor(shape, dtype):
        return {"kind": "tensor", "shape": shape, "dtype": dtype, "stride": [shape[1], 1], "contiguous": True,
                "offset": 0, "device": "cpu"}

    def call(m, in_dtype):
        return {"args": {"input": tensor([m, m], in_dtype), "scale_a": tensor([m, 1], "float32"),
                         "bias": tensor([m, m], "float16")}}

    rel = "python/engine/srt/layers/quant/mm.py"
    row = ScanRow(kernel="_mm_kernel", file=rel, line=1, autotuned=False, entry=f"{rel}:scaled_mm",
                  tests=["test/srt/test_mm.py"])
    prop = from_calls(row, [call(32, "int8"), call(64, "int8"), call(32, "float8_e4m3fn")])
    assert prop.args["scale_a"]["dtype"] == "float32" and "dtype" not in prop.args["bias"]
    assert prop.args["input"]["dtype"] == "int8"
    assert prop.dtypes == ["float16"]
    assert any("`input` took float8_e4m3fn, int8 in the tests: proposed int8" in r for r in prop.review)
