"""The example target repository's own tests pass on this machine (CPU interpreter or GPU)."""
import os
import subprocess
import sys

import torch

from conftest import EXAMPLE


def test_example_repository_tests_pass():
    env = dict(os.environ)
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=EXAMPLE, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
