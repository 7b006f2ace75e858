"""Discovery: `kernelsmith scan` and `kernelsmith init` read the target with ast only."""
import shutil
from pathlib import Path

import git
import pytest
from conftest import ROOT, commit_all

from bot.config import parse_config
from bot.errors import UserError
from bot.init_config import from_calls, proposals, render
from bot.kernel_checks import check_entry
from bot.scan import RepoIndex, format_table, scan

SGLITE = ROOT / "examples" / "sglite"
QUANT = "python/sglite/srt/layers/quantization/per_token_quant.py"


def test_scan_finds_kernels_entries_and_tests_in_the_sglang_layout():
    rows = {r.kernel: r for r in scan(SGLITE)}
    assert set(rows) == {"_fused_add_rms_norm_kernel", "_per_token_quant_int8_kernel", "_merge_state_kernel",
                         "_embedding_lookup_kernel"}
    quant = rows["_per_token_quant_int8_kernel"]
    assert quant.autotuned and quant.entry == f"{QUANT}:per_token_quant_int8"
    assert quant.tests == ["test/srt/test_per_token_quant.py"]
    # the test imports merge_state inside a method: still found
    assert rows["_merge_state_kernel"].tests == ["test/srt/test_merge_state.py"]
    assert all("not in .github/kernelsmith.yml" in " ".join(r.missing) for r in rows.values())


def test_scan_marks_configured_kernels_and_what_is_missing(tmp_path):
    repo = tmp_path / "r"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg/__init__.py").write_text("")
    (repo / "pkg/k.py").write_text(
        "import triton\n\n@triton.jit\ndef _helper(x):\n    return x\n\n"
        "@triton.jit\ndef _k(x_ptr):\n    pass\n\n"
        "def _launch(x):\n    _k[(1,)](x)\n\n"
        "def public(x):\n    return _launch(x)\n\n"
        "class Fn:\n    @staticmethod\n    def forward(x):\n        _k2[(1,)](x)\n\n"
        "@triton.jit\ndef _k2(x_ptr):\n    pass\n")
    rows = {r.kernel: r for r in scan(repo, {"mine": ("pkg/k.py", "public")})}
    assert rows["_k"].entry == "pkg/k.py:public"  # the private launcher's public caller
    assert rows["_k"].configured == "mine" and "no test reaches public" in rows["_k"].missing
    assert "never launched" in rows["_helper"].missing[0]
    assert "launched from method Fn.forward" in rows["_k2"].missing[0]
    table = format_table(list(rows.values()))
    assert table.splitlines()[0].split() == ["kernel", "entry", "test", "missing"] and "pkg/k.py:public" in table


def test_a_moved_kernel_is_found_by_its_symbol(tmp_path):
    repo = tmp_path / "sglite"
    shutil.copytree(SGLITE, repo)
    config = parse_config((repo / ".github/kernelsmith.yml").read_text())
    kernel = config.kernels["per_token_quant_int8"]
    check_entry(repo, "per_token_quant_int8", kernel)  # as configured: fine
    moved = repo / "python/sglite/srt/layers/quant_kernels.py"
    (repo / QUANT).rename(moved)
    with pytest.raises(UserError) as err:
        check_entry(repo, "per_token_quant_int8", kernel)
    assert "does not exist" in err.value.cause and "python/sglite/srt/layers/quant_kernels.py line" in err.value.cause
    assert "Set `path: python/sglite/srt/layers/quant_kernels.py`" in err.value.fix
    assert ".github/kernelsmith.yml line 21 (kernels.per_token_quant_int8.path)" in err.value.cause


def test_a_misspelt_entry_gets_the_close_names(tmp_path):
    config = parse_config((SGLITE / ".github/kernelsmith.yml").read_text().replace(
        "entry: per_token_quant_int8", "entry: per_token_quant"))
    with pytest.raises(UserError) as err:
        check_entry(SGLITE, "per_token_quant_int8", config.kernels["per_token_quant_int8"])
    assert "defines no function `per_token_quant`" in err.value.cause
    assert "line 22 (kernels.per_token_quant_int8.entry)" in err.value.cause
    assert "per_token_quant_int8" in err.value.fix


def test_init_proposal_from_signatures_is_a_valid_config():
    text = render(proposals(SGLITE))
    config = parse_config(text)
    assert set(config.kernels) == {"fused_add_rms_norm", "per_token_quant_int8", "merge_state", "embedding_lookup"}
    assert config.kernels["fused_add_rms_norm"].args["eps"].value == 1e-6  # a literal default is a scalar
    assert "REVIEW" in text


def test_init_from_calls_finds_symbols_optional_args_and_written():
    def call(t, h, residual=True, eps=1e-6):
        tensor = {"kind": "tensor", "dtype": "float16", "contiguous": True}
        return {"args": {"x": {**tensor, "shape": [t, h]}, "w": {**tensor, "shape": [h]},
                         "gate": {**tensor, "shape": [t, 2 * h]},
                         "r": {**tensor, "shape": [t, h]} if residual else {"kind": "none"},
                         "eps": {"kind": "scalar", "value": eps}},
                "written": ["x"] if residual else []}

    index = RepoIndex(SGLITE)
    row = next(r for r in scan(SGLITE, index=index) if r.kernel == "_fused_add_rms_norm_kernel")
    prop = from_calls(row, [call(1, 64), call(7, 96, residual=False), call(33, 128, eps=1e-5)])
    assert prop.args["x"]["shape"] == ["T", "H"] and prop.args["w"]["shape"] == ["H"]
    assert prop.args["gate"]["shape"] == ["T", "2*H"]
    assert prop.args["r"] == {"shape": ["T", "H"], "when": "has_r"}
    assert prop.args["eps"] == {"range": [1e-6, 1e-5]}
    assert prop.written == ["x"] and prop.smoke_shapes[0] == {"T": 1, "H": 64, "has_r": True}
    text = render([prop])
    parse_config(text)


def test_cli_scan_and_init(tmp_path):
    from typer.testing import CliRunner

    from bot.cli import app

    repo = tmp_path / "sglite"
    shutil.copytree(SGLITE, repo)
    (repo / ".github/kernelsmith.yml").unlink()
    commit_all(git.Repo.init(repo), "init")
    runner = CliRunner()
    scanned = runner.invoke(app, ["scan", str(repo)])
    assert scanned.exit_code == 0 and "_per_token_quant_int8_kernel [autotune]" in scanned.output
    made = runner.invoke(app, ["init", str(repo)])
    assert made.exit_code == 0 and "4 kernels" in made.output
    assert set(parse_config((repo / ".github/kernelsmith.yml").read_text()).kernels) == {
        "fused_add_rms_norm", "per_token_quant_int8", "merge_state", "embedding_lookup"}
    again = runner.invoke(app, ["init", str(repo)])
    assert again.exit_code == 2
    assert Path(repo / ".github/kernelsmith.yml").read_text().startswith("# Proposed by `kernelsmith init`")
