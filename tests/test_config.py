import pytest
from conftest import EXAMPLE

from bot.config import CONFIG_PATH, load_config, parse_config, task_spec
from bot.errors import UserError

VALID = """\
version: 1
kernels:
  norm:
    path: pkg/norm.py
    entry: norm
    test: tests/test_norm.py
    dtypes: [float16, bfloat16]
    args:
      x: {shape: [T, "2*H"]}
      w: {shape: [H], dtype: float32}
      eps: {value: 1.0e-6}
      r: {shape: [T, "2*H"], when: residual}
    shapes:
      - {T: 1, H: 64}
      - {T: 8, H: 64, residual: true}
    smoke_shapes:
      - {T: 2, H: 8}
"""


def test_example_config_loads_every_kernel():
    config = load_config(EXAMPLE)
    assert set(config.kernels) >= {"rms_norm", "silu_and_mul", "apply_rotary_pos_emb", "softmax"}
    for kernel in config.kernels.values():
        assert (EXAMPLE / kernel.path).is_file() and (EXAMPLE / kernel.test).is_file()


def test_gpu_task_holds_out_the_smoke_shapes():
    spec = task_spec("norm", parse_config(VALID).kernels["norm"], "triton")
    assert [c.id for c in spec.cases] == ["T=1,H=64/float16", "T=1,H=64/bfloat16",
                                          "T=8,H=64,residual/float16", "T=8,H=64,residual/bfloat16"]
    assert [c.id for c in spec.held_out] == ["T=2,H=8/float16", "T=2,H=8/bfloat16"]


def test_interpreter_task_searches_smoke_shapes_without_bf16():
    spec = task_spec("norm", parse_config(VALID).kernels["norm"], "interpret")
    assert [c.id for c in spec.cases] == ["T=2,H=8/float16"]
    assert spec.held_out == []


@pytest.mark.parametrize("edit, line, words", [
    (("dtypes: [float16, bfloat16]", "dtypes: [float8]"), 7, "float16"),
    (("entry: norm", "entry: norm\n    entyr: norm"), 6, "Extra inputs"),
    (("{T: 1, H: 64}", "{T: 1}"), 4, "shape symbol 'H'"),
    (("eps: {value: 1.0e-6}", "eps: {}"), 11, "either `shape`"),
    (("version: 1", "version: 2"), 1, "version"),
    (("dtype: float32}", "dtype: flaot32}"), 10, "float32"),
], ids=["bad-dtype", "unknown-key", "unbound-symbol", "arg-without-shape-or-value", "version", "bad-arg-dtype"])
def test_invalid_config_names_the_line(edit, line, words):
    with pytest.raises(UserError) as err:
        parse_config(VALID.replace(*edit))
    assert f"line {line}" in str(err.value)
    assert words in str(err.value)
    assert "README" in err.value.fix


def test_yaml_syntax_error_names_the_line():
    with pytest.raises(UserError, match=r"line 5 is not valid YAML \(mapping values"):
        parse_config(VALID.replace("entry: norm", "entry: norm: again"))


def test_missing_config_says_how_to_add_one(tmp_path):
    with pytest.raises(UserError) as err:
        load_config(tmp_path)
    assert CONFIG_PATH in err.value.cause and "Add one" in err.value.fix


def test_written_must_name_an_argument():
    with pytest.raises(UserError, match="written"):
        parse_config(VALID.replace("    args:", "    written: [out]\n    args:"))


@pytest.mark.parametrize("test, text, command, paths", [
    ("tests/test_norm.py::TestNorm::test_fp16 -k 'small and not slow'",
     "tests/test_norm.py::TestNorm::test_fp16 -k 'small and not slow'", False, ("tests/test_norm.py",)),
    ("{path: [tests/a.py, tests/b.py], k: fp16}", "tests/a.py tests/b.py -k fp16", False,
     ("tests/a.py", "tests/b.py")),
    ("{command: python -m unittest test.srt.test_norm}", "python -m unittest test.srt.test_norm", True,
     ("test/srt/test_norm.py", "test/srt.py", "test.py")),
    ("bash scripts/kernel_tests.sh", "bash scripts/kernel_tests.sh", True, ("scripts/kernel_tests.sh",)),
])
def test_test_is_a_path_a_node_id_or_a_command(test, text, command, paths):
    from bot.repo_tests import parse_test

    kernel = parse_config(VALID.replace("test: tests/test_norm.py", f"test: {test}")).kernels["norm"]
    assert kernel.test == text
    parsed = parse_test(kernel.test)
    assert parsed.is_command is command and parsed.paths == paths


@pytest.mark.parametrize("test, words", [
    ("../outside/test_x.py", "must be relative to the repository root"),
    ("{path: tests/a.py, command: pytest}", "either `path`"),
    ("-k fp16", "names no pytest path"),
])
def test_unusable_test_lines_name_the_line(test, words):
    with pytest.raises(UserError, match=rf"line 6 \(kernels.norm.test\).*{words}"):
        parse_config(VALID.replace("test: tests/test_norm.py", f"test: {test}"))


def test_python_and_env_are_read_and_resolved(tmp_path):
    import sys

    from bot.target import resolve_python

    config = parse_config("python: .venv\nenv: {HF_HUB_OFFLINE: '1'}\n" + VALID)
    assert config.python_for(config.kernels["norm"]) == ".venv" and config.env == {"HF_HUB_OFFLINE": "1"}
    venv = tmp_path / ".venv/bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    assert resolve_python(tmp_path, ".venv", "cfg") == str(venv / "python")  # a virtual environment's folder
    assert resolve_python(tmp_path, None, "cfg") is None
    with pytest.raises(UserError, match="`python: nope/python` in cfg"):
        resolve_python(tmp_path, "nope/python", "cfg")
