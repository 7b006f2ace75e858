import pytest

from conftest import CHEATS, EXAMPLE
from runners.policy import check_source

BASELINE = (EXAMPLE / "tinyserve/kernels/rms_norm.py").read_text()


def violations(source):
    return [v.rule for v in check_source(source, BASELINE, "rms_norm")]


def test_baseline_and_honest_rewrite_pass():
    assert violations(BASELINE) == []
    assert violations((CHEATS / "honest_rewrite.py").read_text()) == []


@pytest.mark.parametrize("cheat, rule", [
    ("side_stream.py", "attribute"),
    ("reads_environment.py", "import"),
    ("calls_baseline.py", "import"),
    ("patches_timer.py", "attribute"),
    ("detects_capture.py", "attribute"),
    ("changed_signature.py", "signature"),
])
def test_cheats_are_refused_before_running(cheat, rule):
    assert rule in violations((CHEATS / cheat).read_text())


@pytest.mark.parametrize("snippet", [
    "import threading", "import time", "import ctypes", "from os import environ", "import importlib",
    "open('/etc/passwd')", "eval('1')", "__import__('os')", "globals()['x'] = 1",
    "torch.cuda.synchronize()", "f.__globals__", "def g():\n    global X\n    X = 1",
])
def test_forbidden_constructs(snippet):
    assert violations(BASELINE + "\n" + snippet + "\n")


def test_missing_entry_and_syntax_errors():
    assert violations("def other(): pass\n") == ["signature"]
    assert violations("def rms_norm(:\n") == ["syntax"]
