"""What LMDeploy (InternLM/lmdeploy, a serving engine) brought, as a small repository on disk in its layout:
kernels in ``lmdeploy/pytorch/kernels/cuda/`` whose package ``__init__`` imports every kernel, a ``utils.py``
that asks Triton's driver for the backend at import, launches with a list grid, tests in
``tests/pytorch/kernel/`` that import the kernels inside the test function, ask ``torch.cuda`` for the current
device while collecting, and hard-code ``.cuda()``; and a test of another op that uses a kernel as a helper."""
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest
from conftest import commit_all

from bot.capture import run_capture
from bot.kernel_checks import environment_fault
from bot.repo_tests import TestSettings, run_repo_test
from bot.scan import scan
from bot.target import open_target

UTILS = '''\
import functools

import torch
import triton


@functools.lru_cache
def get_device_props(device=None):
    if device is None:
        device = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(device)
    return dict(multi_processor_count=props.multi_processor_count)


def is_cuda():
    return triton.runtime.driver.active.get_current_target().backend == 'cuda'


@functools.lru_cache
def supports_tma():
    return is_cuda() and torch.cuda.get_device_capability()[0] >= 9


if supports_tma():
    from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
'''

ACTIVATION = '''\
import torch
import triton
import triton.language as tl

from .utils import get_device_props


@triton.jit
def _double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def double(x):
    props = get_device_props(x.device.index)
    out = torch.empty_like(x)
    grid = (min(props['multi_processor_count'], triton.cdiv(x.numel(), 64)),)
    _double_kernel[grid](x, out, x.numel(), BLOCK=64)
    return out
'''

SAMPLING = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _pick_kernel(scores_ptr, out_ptr, stride, N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, N)
    s = tl.load(scores_ptr + row * stride + offs)
    tl.store(out_ptr + row, tl.argmax(s, 0))


def pick(scores):
    batch, n = scores.shape
    out = torch.empty(batch, dtype=torch.int32, device=scores.device)
    grid = [batch]  # a list, as lmdeploy's multinomial_sampling passes it
    _pick_kernel[grid](scores, out, scores.stride(0), N=n)
    return out
'''

ROTARY = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_kernel(x_ptr, cos_ptr, out_ptr, D: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, D)
    x = tl.load(x_ptr + row * D + offs)
    tl.store(out_ptr + row * D + offs, x * tl.load(cos_ptr + offs))


def apply_rotary_pos_emb(x, cos):
    out = torch.empty_like(x)
    _rotate_kernel[(x.shape[0],)](x, cos, out, D=x.shape[1])
    return out
'''

LMDEPLOY_UTILS = '''\
def is_bf16_supported(device_type='cuda'):
    import torch
    device = torch.cuda.current_device()
    cuda_version = torch.version.cuda
    return cuda_version is not None and torch.cuda.get_device_properties(device).major >= 8
'''

TEST_SAMPLING = '''\
import pytest
import torch

from lmdeploy.utils import is_bf16_supported


def _bf16_mark():
    return pytest.mark.skipif(not is_bf16_supported(), reason='bf16 not supported.')


@pytest.mark.parametrize('dtype', [torch.float32, pytest.param(torch.bfloat16, marks=_bf16_mark())])
@pytest.mark.parametrize('batch', [2, 5])
def test_pick(batch, dtype):
    from lmdeploy.pytorch.kernels.cuda import pick
    scores = torch.rand(batch, 16).cuda().to(dtype)
    assert torch.equal(pick(scores).long(), scores.float().argmax(-1))


@pytest.mark.skipif(torch.cuda.get_device_capability()[0] < 9, reason='require device with cc>=9.0')
def test_pick_fp8():
    raise AssertionError('skipped below compute capability 9')
'''

# a test that needs the GPU's properties cannot run on the CPU interpreter, and that is not the kernel's fault
TEST_PROPERTIES = '''\
import torch


def test_double():
    from lmdeploy.pytorch.kernels.cuda import double
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.randn(sms).cuda()
    torch.testing.assert_close(double(x), x * 2)
'''

TEST_ROTARY = '''\
import torch


def test_apply_rotary():
    from lmdeploy.pytorch.kernels.cuda import apply_rotary_pos_emb
    x, cos = torch.randn(3, 16, device='cuda'), torch.randn(16, device='cuda')
    torch.testing.assert_close(apply_rotary_pos_emb(x, cos), x * cos)
'''

# another op's test that uses the rotary kernel to build its reference, importing its module by path
TEST_PREPROCESS = '''\
import torch


def test_indexer_preprocess():
    from lmdeploy.pytorch.kernels.cuda.apply_rotary_pos_emb import apply_rotary_pos_emb
    x = torch.randn(2, 16, device='cuda')
    assert apply_rotary_pos_emb(x, torch.ones(16, device='cuda')).shape == x.shape
'''


def make_repo(tmp_path, utils=UTILS):
    root = tmp_path / "lmdeploy"
    cuda = root / "lmdeploy/pytorch/kernels/cuda"
    cuda.mkdir(parents=True)
    (root / "lmdeploy/__init__.py").write_text("from .version import __version__  # noqa: F401\n")
    (root / "lmdeploy/version.py").write_text("__version__ = '0.0.1'\n")
    (root / "lmdeploy/utils.py").write_text(LMDEPLOY_UTILS)
    (root / "lmdeploy/pytorch/__init__.py").write_text("")
    (root / "lmdeploy/pytorch/kernels/__init__.py").write_text("")
    (cuda / "__init__.py").write_text("from .activation import double\nfrom .apply_rotary_pos_emb import "
                                      "apply_rotary_pos_emb\nfrom .sampling import pick\n\n"
                                      "__all__ = ['double', 'apply_rotary_pos_emb', 'pick']\n")
    (cuda / "utils.py").write_text(utils)
    (cuda / "activation.py").write_text(ACTIVATION)
    (cuda / "sampling.py").write_text(SAMPLING)
    (cuda / "apply_rotary_pos_emb.py").write_text(ROTARY)
    (cuda / "causal_conv1d.py").write_text(  # a TileLang kernel beside the Triton ones (read, never imported)
        "import tilelang\nfrom numba import jit\n\n\n@tilelang.jit(pass_configs={})\ndef causal_conv1d_fwd(dim):\n"
        "    return dim\n\n\n@jit\ndef host_loop(x):\n    return x\n")
    tests = root / "tests/pytorch/kernel"
    tests.mkdir(parents=True)
    for d in (root / "tests", root / "tests/pytorch", tests):
        (d / "__init__.py").write_text("")
    (tests / "test_sampling.py").write_text(TEST_SAMPLING)
    (tests / "test_apply_rotary.py").write_text(TEST_ROTARY)
    (tests / "test_dsa_indexer_preprocess.py").write_text(TEST_PREPROCESS)
    (tests / "test_activation.py").write_text(TEST_PROPERTIES)
    commit_all(git.Repo.init(root, initial_branch="main"), "baseline")
    return root


def test_the_test_named_after_the_kernel_comes_before_a_test_that_uses_it_as_a_helper(tmp_path):
    rows = {r.kernel: r for r in scan(make_repo(tmp_path))}
    assert set(rows) == {"_double_kernel", "_pick_kernel", "_rotate_kernel"}  # TileLang's and numba's @jit are not
    rotary = rows["_rotate_kernel"]
    assert rotary.entry == "lmdeploy/pytorch/kernels/cuda/apply_rotary_pos_emb.py:apply_rotary_pos_emb"
    assert rotary.tests == ["tests/pytorch/kernel/test_apply_rotary.py",
                            "tests/pytorch/kernel/test_dsa_indexer_preprocess.py"]
    assert rows["_pick_kernel"].tests[0] == "tests/pytorch/kernel/test_sampling.py"


def test_gpu_written_tests_of_a_package_that_asks_triton_for_its_backend_record_calls_on_the_cpu(tmp_path):
    """The package ``__init__`` imports ``utils.py``, which asks ``triton.runtime.driver.active`` for the backend
    (no driver on the CPU interpreter); collection asks ``torch.cuda.current_device()``; the launch passes a
    list grid. With the interpreter's stand-ins all three run, and the calls are recorded."""
    target = open_target(make_repo(tmp_path))
    target.tests = TestSettings()
    capture = run_capture(target, "tests/pytorch/kernel/test_sampling.py", "lmdeploy.pytorch.kernels.cuda.sampling",
                          "pick", "interpret")
    assert capture.run.passed, capture.run.output_tail
    assert capture.error is None and capture.shims == ["driver", "grid"]
    assert sorted(c["args"]["scores"]["shape"][0] for c in capture.calls) == [2, 5]


def test_every_test_run_on_the_interpreter_gets_the_cpu_dry_run_not_only_the_capture(tmp_path):
    """The run "before any change" (when the capture run did not pass) and the run with the champion are plain
    pytest runs: without the dry run they failed at collection, and kernelsmith blamed the repository's test."""
    root = make_repo(tmp_path)
    run = run_repo_test(root, "tests/pytorch/kernel/test_sampling.py tests/pytorch/kernel/test_apply_rotary.py",
                        "interpret")
    assert run.passed, run.output_tail
    # 3 skipped: bf16 twice (no CUDA version) and the test for compute capability 9 (the CPU is no GPU of any)
    assert "3 passed, 3 skipped" in run.output_tail
    assert run.command == ("python -m pytest -q -p no:cacheprovider tests/pytorch/kernel/test_sampling.py "
                           "tests/pytorch/kernel/test_apply_rotary.py")


def test_a_package_that_needs_a_gpu_to_import_is_named_at_its_line_not_blamed_on_the_recorder(tmp_path):
    utils = UTILS.replace("if supports_tma():", "if torch.cuda.get_device_properties(0).major >= 9:")
    target = open_target(make_repo(tmp_path, utils=utils))
    target.tests = TestSettings()
    capture = run_capture(target, "tests/pytorch/kernel/test_apply_rotary.py",
                          "lmdeploy.pytorch.kernels.cuda.apply_rotary_pos_emb", "apply_rotary_pos_emb", "interpret")
    assert not capture.calls and not capture.installed
    why = capture.why_none()
    assert "recorder could not wrap" not in why
    assert why.startswith("importing the kernel module as the tests do failed at lmdeploy/pytorch/kernels/cuda/"
                          "utils.py line 24 (`if torch.cuda.get_device_properties(0).major >= 9:`), reached from "
                          "lmdeploy/pytorch/kernels/cuda/__init__.py line 1"), why
    assert "the environment, not the kernel" in why


def _traceback_of(tmp_path, module: str, call: str, files: dict[str, str]) -> str:
    """The last 14 lines of a real traceback (as the worker reports it) from running ``call`` on the CPU
    interpreter in a fresh process, without kernelsmith's stand-ins."""
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    script = (f"import sys, traceback, torch\nsys.path.insert(0, {str(tmp_path)!r})\nimport {module} as m\n"
              f"try:\n    {call}\nexcept Exception as exc:\n"
              "    text = ''.join(traceback.format_exception(type(exc), exc, exc.__traceback__))\n"
              "    print('\\n'.join(text.strip().splitlines()[-14:]))\n")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                          check=True).stdout


def test_baseline_failures_of_the_interpreter_or_the_missing_gpu_are_not_blamed_on_the_kernel(tmp_path):
    rel = "lmdeploy/pytorch/kernels/cuda/sampling.py"
    error = _traceback_of(tmp_path, "lmdeploy.pytorch.kernels.cuda.sampling", "m.pick(torch.rand(3, 16))",
                          {rel: SAMPLING})
    assert "can only concatenate list" in error
    fault = environment_fault(error, "interpret", [rel], tmp_path)
    assert fault.startswith(f"Triton's CPU interpreter cannot launch this kernel as written ({rel} line 18: "
                            "`_pick_kernel[grid](scores, out, scores.stride(0), N=n)`): the grid is a list"), fault
    assert environment_fault(error, "triton", [rel], tmp_path) is None  # on a GPU it is the kernel's own error

    rel = "lmdeploy/pytorch/kernels/cuda/activation.py"
    error = _traceback_of(tmp_path / "b", "lmdeploy.pytorch.kernels.cuda.activation", "m.double(torch.rand(8))",
                          {rel: ACTIVATION, "lmdeploy/pytorch/kernels/cuda/utils.py": UTILS.split("\n\n\nif ")[0]})
    fault = environment_fault(error, "interpret", [rel, "lmdeploy/pytorch/kernels/cuda/utils.py"], tmp_path / "b")
    assert fault.startswith("the entry asks torch.cuda about the GPU when it is called"), fault
    assert "the environment, not the kernel" in fault


def test_a_kernel_error_on_the_interpreter_is_still_the_kernel(tmp_path):
    rel = "k/bad.py"
    bad = ROTARY.replace("x * tl.load(cos_ptr + offs)", "x * tl.load(cos_ptr + tl.arange(0, 2 * D))")  # shapes
    error = _traceback_of(tmp_path, "k.bad", "m.apply_rotary_pos_emb(torch.rand(2, 16), torch.rand(16))",
                          {rel: bad, "k/__init__.py": ""})
    assert "16" in error and "32" in error, error  # the shapes that do not broadcast
    assert environment_fault(error, "interpret", [rel], tmp_path) is None


def test_the_interpreter_stand_ins_answer_only_where_no_driver_is_active():
    script = ("import sys; sys.path.insert(0, 'runners'); import interpreter_shims as s\n"
              "import triton\ntry:\n    triton.runtime.driver.active\nexcept RuntimeError as e:\n"
              "    print('no driver:', e)\n"
              "print(s.install())\nprint(triton.runtime.driver.active.get_current_target().backend)\n"
              "print(s.install())\n")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                         check=True, cwd=Path(__file__).resolve().parent.parent).stdout.split("\n")
    assert out[0].startswith("no driver: 0 active drivers")
    assert out[1:4] == ["['driver', 'grid']", "cpu", "[]"]  # once only


def test_the_import_check_follows_the_workers_on_the_interpreter_stand_ins(tmp_path, monkeypatch):
    """``utils.py`` asks Triton's driver for the backend at import. The import check imports the module as the
    workers will: without their stand-ins it names that line; with them (INTERPRETER_SHIMS_IN_WORKERS) it
    imports, and the GPU query at call time is left to the baseline check."""
    import bot.kernel_checks as checks
    from bot.config import parse_config
    from bot.errors import UserError
    from runners.extract import extraction_plan

    root = make_repo(tmp_path)
    kernel = parse_config("kernels:\n  double:\n    path: lmdeploy/pytorch/kernels/cuda/activation.py\n"
                          "    entry: double\n    test: tests/pytorch/kernel/test_sampling.py\n"
                          "    args: {x: {shape: [N]}}\n    shapes: [{N: 8}]\n").kernels["double"]
    plan = extraction_plan(root, kernel.path, kernel.entry)
    assert plan.files == ["lmdeploy/pytorch/kernels/cuda/activation.py", "lmdeploy/pytorch/kernels/cuda/utils.py"]
    monkeypatch.setattr(checks, "INTERPRETER_SHIMS_IN_WORKERS", False)
    with pytest.raises(UserError) as err:
        checks.check_import(root, "double", kernel, plan, "interpret", None, [])
    assert err.value.cause.startswith("lmdeploy/pytorch/kernels/cuda/utils.py line 16 (`return triton.runtime.driver."
                                      "active.get_current_target().backend == 'cuda'`) queries the GPU"), err.value.cause
    monkeypatch.setattr(checks, "INTERPRETER_SHIMS_IN_WORKERS", True)
    checks.check_import(root, "double", kernel, plan, "interpret", None, [])


def test_a_test_that_needs_the_gpus_properties_is_named_as_the_environment_at_its_line(tmp_path):
    from bot.kernel_checks import test_environment_fault

    run = run_repo_test(make_repo(tmp_path), "tests/pytorch/kernel/test_activation.py", "interpret")
    assert not run.passed
    fault = test_environment_fault(run.output_tail, "interpret")
    assert fault.startswith("the test (or the code it calls) asks torch.cuda about the GPU at "
                            "tests/pytorch/kernel/test_activation.py line 6 "
                            "(`sms = torch.cuda.get_device_properties(0).multi_processor_count`)"), fault
    assert test_environment_fault(run.output_tail, "triton") is None


def test_an_error_with_brackets_is_printed_as_written():
    """`_multinomial_sampling_kernel[grid](scores,` lost its `[grid]` to the console's markup."""
    import typer

    from bot import cli
    from bot.errors import UserError

    with cli.console.capture() as out, pytest.raises(typer.Exit):  # without escaping: `_pick_kernel(scores`
        cli._fail(UserError("launch at `_pick_kernel[grid](scores, out)` failed in test_pick[2-dtype0]", "fix [it]"))
    assert "`_pick_kernel[grid](scores, out)` failed in test_pick[2-dtype0]" in out.get()
    assert "fix [it]" in out.get()


def test_an_integer_scalar_that_varies_is_proposed_as_its_usual_value_and_replayed_per_call():
    """LMDeploy's fill_kv_cache: ``quant_policy`` (an IntEnum: 0, 4, 8, 42) and ``max_q_seq_length`` (the
    longest of the lengths tensor) were proposed as ranges, which draw modes and lengths that do not exist."""
    from bot.capture import to_case
    from bot.config import parse_config
    from bot.init_config import from_calls, render
    from bot.scan import ScanRow

    def call(t, policy):
        return {"args": {"k": {"kind": "tensor", "dtype": "float16", "contiguous": True, "shape": [t, 8]},
                         "max_q_seq_length": {"kind": "scalar", "value": t},
                         "quant_policy": {"kind": "scalar", "value": policy},
                         "scale": {"kind": "scalar", "value": 0.5 if policy else 0.25}}}

    row = ScanRow(kernel="_k", file="lmdeploy/k.py", line=1, autotuned=False, entry="lmdeploy/k.py:fill",
                  tests=["tests/test_k.py"])
    calls = [call(3, 0), call(5, 4), call(7, 0), call(9, 42)]
    prop = from_calls(row, calls)
    assert prop.args["quant_policy"] == {"value": 0}
    assert prop.args["max_q_seq_length"] == {"size": "T"}  # it follows the tensor here: a size, not a range
    assert prop.args["scale"] == {"range": [0.25, 0.5]}  # floats still get a range
    assert any("`quant_policy` took 3 integer values in the tests (0, 4, 42)" in r for r in prop.review)
    kernel = parse_config(render([prop])).kernels["fill"]
    case, why = to_case(call(9, 42), kernel)
    assert case is not None and case.values["quant_policy"] == 42, why  # a captured case keeps its own mode


def test_the_workers_take_a_list_grid_on_the_interpreter(rms_evaluator):
    """Compiled Triton takes ``kernel[[rows]](...)``; the interpreter needs the workers' stand-ins for it
    (runners/worker.py puts runners/interpreter_shims.py in on the interpreter): the same kernel launched with a
    list grid is evaluated, not refused for the interpreter's limitation."""
    source = rms_evaluator.baseline
    assert "_rms_norm_kernel[grid](" in source
    listed = source.replace("_rms_norm_kernel[grid](", "_rms_norm_kernel[list(grid)](", 1)
    ev = rms_evaluator.evaluate(listed, seed=3, time_it=False, trials=1)
    assert ev.ok, ev.error
