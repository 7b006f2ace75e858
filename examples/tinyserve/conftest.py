"""Repository-wide pytest configuration.

Without a CUDA device the Triton kernels run in Triton's CPU interpreter.
``TRITON_INTERPRET`` must be set before any module defining a ``@triton.jit``
kernel is imported, which is why this happens at the top of the root conftest
(pytest loads it before collecting the test modules).
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


@pytest.fixture
def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
