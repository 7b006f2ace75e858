"""A target laid out like SGLang, used as it is: absolute imports, a deep package, a GPU probe at import,
an autotuned kernel, unittest classes in a separate tree."""
import json
import shutil

import git
import pytest
import yaml
from conftest import ROOT, commit_all

from bot.config import parse_config
from bot.errors import UserError
from bot.kernel_checks import check_import
from bot.optimize import OptimizeOptions, _preflight, optimize
from runners.extract import extraction_plan

SGLITE = ROOT / "examples" / "sglite"
NORM = "python/sglite/srt/layers/elementwise/fused_add_rms_norm.py"
MERGE = "python/sglite/srt/layers/attention/triton_ops/merge_state.py"


@pytest.fixture
def sglite_repo(tmp_path):
    dest = tmp_path / "sglite"
    shutil.copytree(SGLITE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    commit_all(git.Repo.init(dest, initial_branch="main"), "baseline")
    return dest


def test_bundle_copies_relative_helpers_and_leaves_the_host_package_in_the_checkout():
    plan = extraction_plan(SGLITE, NORM, "fused_add_rms_norm")
    assert plan.files == [NORM] and plan.import_root == "python" and plan.package == "sglite"
    assert plan.dotted == "sglite.srt.layers.elementwise.fused_add_rms_norm"
    assert plan.host_files == ["python/sglite/__init__.py", "python/sglite/srt/__init__.py",
                               "python/sglite/srt/utils.py"]
    merge = extraction_plan(SGLITE, MERGE, "merge_state")
    assert merge.files == [MERGE, "python/sglite/srt/layers/attention/triton_ops/device_limits.py"]


def test_only_lazy_imports_the_entry_reaches_are_followed():
    assert "python/sglite/srt/debug_tools.py" not in extraction_plan(SGLITE, NORM, "fused_add_rms_norm").host_files
    debug = extraction_plan(SGLITE, NORM, "fused_add_rms_norm_debug")
    assert "python/sglite/srt/debug_tools.py" in debug.host_files  # reached through utils.dump_debug_tensors
    assert any(e.module == "not_installed_profiler" for e in debug.external)


def _kernel(name):
    return parse_config((SGLITE / ".github/kernelsmith.yml").read_text()).kernels[name]


def test_a_gpu_probe_at_import_is_named_at_the_helper_line():
    kernel = _kernel("merge_state")
    plan = extraction_plan(SGLITE, kernel.path, kernel.entry)
    with pytest.raises(UserError) as err:
        check_import(SGLITE, "merge_state", kernel, plan, "interpret", None, [str(SGLITE / "python")])
    cause = err.value.cause
    assert cause.startswith("python/sglite/srt/layers/attention/triton_ops/device_limits.py line 4 "
                            "(`_PROPS = torch.cuda.get_device_properties(torch.cuda.current_device())`) queries the GPU")
    assert f"reached from {MERGE} line 6" in cause
    assert "--backend triton" in err.value.fix and "move that query" in err.value.fix


def test_a_module_importing_something_not_installed_is_named(tmp_path):
    repo = tmp_path / "r"
    shutil.copytree(SGLITE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    utils = repo / "python/sglite/srt/utils.py"
    utils.write_text(utils.read_text().replace("import triton\n", "import triton\nimport flashinfer_not_here\n", 1))
    kernel = _kernel("fused_add_rms_norm")
    plan = extraction_plan(repo, kernel.path, kernel.entry)
    with pytest.raises(UserError) as err:
        check_import(repo, "fused_add_rms_norm", kernel, plan, "interpret", None, [str(repo / "python")])
    assert err.value.cause.startswith("python/sglite/srt/utils.py line 4 (`import flashinfer_not_here`) imports "
                                      "`flashinfer_not_here`, which is not installed in")
    assert f"reached from {NORM} line 6" in err.value.cause and "`python:`" in err.value.fix


def test_an_entry_that_is_not_callable_is_refused():
    kernel = _kernel("per_token_quant_int8").model_copy(update={"entry": "CONFIGS"})
    plan = extraction_plan(SGLITE, kernel.path, None)
    with pytest.raises(UserError) as err:
        check_import(SGLITE, "q", kernel, plan, "interpret", None, [str(SGLITE / "python")])
    assert "has no callable `CONFIGS`" in err.value.cause and "per_token_quant_int8" in err.value.fix


def test_bad_input_is_refused_before_the_output_folder_exists(sglite_repo, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(UserError) as err:
        _preflight(OptimizeOptions(target=sglite_repo, kernel="merge_state", out=out, backend="interpret"))
    assert "queries the GPU" in err.value.cause and not out.exists()
    config = sglite_repo / ".github/kernelsmith.yml"
    config.write_text(config.read_text().replace(
        "version: 1\n", "version: 1\npython: .venv-missing/bin/python\n"))
    with pytest.raises(UserError) as err:
        _preflight(OptimizeOptions(target=sglite_repo, kernel="fused_add_rms_norm", out=out, backend="interpret"))
    assert "`python: .venv-missing/bin/python`" in err.value.cause and not out.exists()


def test_the_autotuned_kernel_runs_where_it_lives(sglite_repo, tmp_path):
    """Absolute imports resolve through the checkout's import root; the tests run once with capture; the
    tuner's knobs are the autotuner's configs and key."""
    result = optimize(OptimizeOptions(target=sglite_repo, kernel="per_token_quant_int8", out=tmp_path / "run",
                                      budget=2, backend="interpret", timeout=240, trials=1))
    assert result.verdict == "not_timed"
    task = yaml.safe_load((tmp_path / "run/bundle/task.yaml").read_text())
    assert task["import_paths"] == [str((sglite_repo / "python").resolve())]
    assert task["files"] == ["python/sglite/srt/layers/quantization/per_token_quant.py"]
    captured = [c for c in task["cases"] if c["origin"] == "captured"]
    assert captured and task["captured"]["calls"] >= 6 and task["captured"]["plugin_error"] is None
    assert {c["symbols"]["H"] for c in captured} >= {256, 300, 1024}
    rows = [json.loads(line) for line in (tmp_path / "run/candidates.jsonl").read_text().splitlines()]
    assert all(r["evaluation"]["ok"] for r in rows), [r["evaluation"]["error"] for r in rows]
    # the key bucketed (an argument added to the kernel and its launch), then exact: both ran on the interpreter
    assert [r["genome"] for r in rows[1:]] == [{"_per_token_quant_int8_kernel@autotune.key": 1},
                                              {"_per_token_quant_int8_kernel@autotune.key": 2}]
    log = (tmp_path / "run/run.log").read_text()
    assert "_per_token_quant_int8_kernel@autotune.configs" in log


def test_a_test_command_runs_in_the_configured_python_with_the_import_root(tmp_path):
    from bot.repo_tests import TestSettings, run_repo_test

    import site
    import subprocess
    import venv as venvs

    venvs.create(tmp_path / "venv", with_pip=False)  # "the target's own environment", sharing our torch
    site_dir = subprocess.run([tmp_path / "venv/bin/python", "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / site_dir / "ks_base.pth").write_text(site.getsitepackages()[0] + "\n")
    venv = tmp_path / "venv/bin"
    settings = TestSettings(python=str(venv / "python"), env={"KS_MARK": "1"}, import_roots=["python"])
    test = ("bash -c 'cd test/srt && python -m unittest test_per_token_quant "  # as SGLang's CI runs them
            "&& python -c \"import os, sys; print(sys.prefix, os.environ[\\\"KS_MARK\\\"])\"'")
    run = run_repo_test(SGLITE, test, "interpret", settings=settings)
    assert run.passed, run.output_tail
    assert "Ran 2 tests" in run.output_tail and "OK (skipped=1)" in run.output_tail
    assert f"{tmp_path / 'venv'} 1" in run.output_tail  # the configured interpreter, the configured env
    broken = run_repo_test(SGLITE, test, "interpret", settings=TestSettings(python=str(venv / "python")))
    assert not broken.passed and "No module named 'sglite'" in broken.output_tail  # no import root, no package
