"""Harness capture: the repository's own test runs once and every call of the entry becomes data."""
import shutil

import git
import pytest
from conftest import ROOT, commit_all

from bot.capture import captured_cases, run_capture, to_case
from bot.config import parse_config
from bot.errors import UserError
from bot.optimize import OptimizeOptions, _preflight
from bot.repo_tests import TestSettings
from bot.target import open_target

SGLITE = ROOT / "examples" / "sglite"
NORM = "sglite.srt.layers.elementwise.fused_add_rms_norm"


@pytest.fixture
def sglite_repo(tmp_path):
    dest = tmp_path / "sglite"
    shutil.copytree(SGLITE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    commit_all(git.Repo.init(dest, initial_branch="main"), "baseline")
    return dest


def test_capture_records_shapes_dtypes_strides_and_written_arguments(sglite_repo):
    target = open_target(sglite_repo)
    target.tests = TestSettings(import_roots=["python"])
    capture = run_capture(target, "test/srt/test_fused_add_rms_norm.py", NORM, "fused_add_rms_norm", "interpret")
    assert capture.run.passed and capture.installed and capture.error is None, capture.run.output_tail
    shapes = {tuple(c["args"]["x"]["shape"]) for c in capture.calls}
    assert {(1, 64), (5, 96), (16, 256), (3, 4, 128)} <= shapes
    first = capture.calls[0]
    assert first["args"]["x"]["dtype"] in ("float16", "float32") and first["args"]["x"]["contiguous"]
    assert first["args"]["x"]["stride"] == [first["args"]["x"]["shape"][1], 1]
    assert first["args"]["eps"] == {"kind": "scalar", "value": 1e-6}
    assert first["written"] == ["residual", "x"]  # in place, as the config declares
    assert first["test"].startswith("test/srt/test_fused_add_rms_norm.py::TestFusedAddRMSNorm")
    kernel = parse_config((SGLITE / ".github/kernelsmith.yml").read_text()).kernels["fused_add_rms_norm"]
    cases, summary = captured_cases(capture.calls, kernel, "interpret", 3, [])
    assert len(cases) == 3 and all(c.origin == "captured" for c in cases)
    # the CPU dry run answers torch.cuda.is_available(): the test takes its GPU branch (bf16, and 1x4096 and
    # 1024x4096), whose calls are recorded and then left out on the interpreter
    assert summary["skipped"] == {"argument `x` has 3 dimensions, the config gives 2": 3,
                                  "too large or bf16 for the CPU interpreter": 7}
    assert summary["written_by_tests"] == ["residual", "x"] and summary["undeclared_written"] == []
    sizes = [c.symbols["T"] * c.symbols["H"] for c in cases]
    assert sizes == sorted(sizes) and sizes[0] == 64 and sizes[-1] == 16 * 256  # spread from smallest to largest


KERNEL = parse_config("""\
version: 1
kernels:
  k:
    path: pkg/k.py
    entry: k
    test: tests/test_k.py
    dtypes: [float16]
    args:
      x: {shape: [T, "2*I"]}
      w: {shape: [I], dtype: float32}
      r: {shape: [T, "2*I"], when: residual}
      eps: {value: 1.0e-6}
    shapes:
      - {T: 1, I: 64}
      - {T: 8, I: 64, residual: true}
""").kernels["k"]


def _t(shape, dtype="float16", contiguous=True, stride=None):
    return {"kind": "tensor", "shape": shape, "dtype": dtype, "contiguous": contiguous,
            "stride": stride or [shape[-1], 1]}


def test_a_call_becomes_config_symbols():
    case, why = to_case({"args": {"x": _t([7, 320]), "w": _t([160], "float32"), "r": {"kind": "none"},
                                  "eps": {"kind": "scalar", "value": 1e-5}}}, KERNEL)
    assert why == "" and case.symbols == {"T": 7, "I": 160, "residual": False}
    assert case.dtype == "float16" and case.values == {"eps": 1e-5} and case.origin == "captured"
    strided, _ = to_case({"args": {"x": _t([4, 64], contiguous=False, stride=[128, 1]), "w": _t([32], "float32"),
                                   "r": _t([4, 64]), "eps": {"kind": "scalar", "value": 1e-6}}}, KERNEL)
    assert strided.symbols["residual"] is True and strided.strides == {"x": [128, 1]}
    assert strided.id == "T=4,I=32,residual,x:strided/float16"


@pytest.mark.parametrize("args, reason", [
    ({"x": _t([7, 320]), "w": _t([100], "float32")}, "argument `w`: I=100 here but 160 in another argument"),
    ({"x": _t([7, 321]), "w": _t([160], "float32")}, "argument `x`: cannot solve 2*I=321"),
    ({"x": _t([2, 7, 320]), "w": _t([160], "float32")}, "argument `x` has 3 dimensions"),
    ({"x": _t([7, 320]), "w": _t([160], "float32"), "r": _t([7, 320], "bfloat16")}, "mixed float dtypes"),
    ({"x": {"kind": "none"}, "w": _t([160], "float32")}, "argument `x` was none, not a tensor"),
])
def test_calls_that_do_not_fit_say_why(args, reason):
    case, why = to_case({"args": args}, KERNEL)
    assert case is None and why.startswith(reason)


def test_captured_cases_are_deduplicated_bounded_and_kept_small_on_the_interpreter():
    calls = [{"args": {"x": _t([t, 2 * i]), "w": _t([i], "float32")}, "written": ["x"]}
             for t in (1, 2, 4, 8, 16, 4096) for i in (64, 64, 128)]
    configured = [to_case({"args": {"x": _t([1, 128]), "w": _t([64], "float32")}}, KERNEL)[0]]
    cases, summary = captured_cases(calls, KERNEL, "triton", 4, configured)
    assert summary["calls"] == 18 and summary["distinct"] == 11  # 12 shapes, one already configured
    assert len(cases) == 4 and cases[0].symbols == {"T": 2, "I": 64, "residual": False}  # T=1,I=64 is configured
    assert cases[-1].symbols == {"T": 4096, "I": 128, "residual": False}
    assert summary["undeclared_written"] == ["x"]  # the tests show x written in place; the config does not
    small, summary = captured_cases(calls, KERNEL, "interpret", 16, [])
    assert all(c.symbols["T"] < 4096 for c in small)
    assert summary["skipped"] == {"too large or bf16 for the CPU interpreter": 3}


def _point_test(repo, test):
    path = repo / ".github/kernelsmith.yml"
    path.write_text(path.read_text().replace("test/srt/test_fused_add_rms_norm.py::TestFusedAddRMSNorm", test))


def test_a_test_that_never_mentions_the_entry_is_refused_before_anything_is_written(sglite_repo, tmp_path):
    _point_test(sglite_repo, "test/srt/test_per_token_quant.py")
    commit_all(git.Repo(sglite_repo), "wrong test")
    out = tmp_path / "run"
    with pytest.raises(UserError) as err:
        _preflight(OptimizeOptions(target=sglite_repo, kernel="fused_add_rms_norm", out=out, backend="interpret"))
    assert "test/srt/test_per_token_quant.py" in err.value.cause and "never calls `fused_add_rms_norm`" in err.value.cause
    assert ".github/kernelsmith.yml line 6 (kernels.fused_add_rms_norm.test)" in err.value.cause
    assert "kernelsmith scan" in err.value.fix and not out.exists()


def test_a_test_that_passes_without_calling_the_entry_is_refused(sglite_repo, tmp_path):
    (sglite_repo / "test/srt/test_named_only.py").write_text(
        "import unittest\n\n\nclass TestNamedOnly(unittest.TestCase):\n"
        "    def test_nothing(self):\n        self.assertTrue('fused_add_rms_norm')\n")
    _point_test(sglite_repo, "test/srt/test_named_only.py")
    commit_all(git.Repo(sglite_repo), "a test that only names the entry")
    with pytest.raises(UserError) as err:
        _preflight(OptimizeOptions(target=sglite_repo, kernel="fused_add_rms_norm", out=tmp_path / "run",
                                   backend="interpret"))
    assert "passed without calling `fused_add_rms_norm` once" in err.value.cause
    assert not (tmp_path / "run").exists()
