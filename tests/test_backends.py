"""The backend seam: one place per backend for its facts and its workers' environment."""
import pytest

from runners.backends import BACKENDS, get_backend
from runners.sandbox import scrubbed_env


def test_each_backend_says_what_it_is():
    assert set(BACKENDS) == {"triton", "maca", "interpret"}
    assert get_backend("nvidia").name == "triton" and get_backend("metax").name == "maca"
    assert get_backend("triton").warp_size == 32 and get_backend("maca").warp_size == 64
    assert not get_backend("interpret").timed and get_backend("maca").timed
    with pytest.raises(KeyError, match="unknown backend"):
        get_backend("rocm")


def test_maca_workers_share_a_gpu_and_pin_it_maca_first(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    maca = get_backend("maca")
    env = maca.worker_env(scrubbed_env(maca), device_index=3)
    assert env["MACA_MPS_MODE"] == "1"  # the oracle and the candidate are two processes on one GPU
    assert env["MACA_VISIBLE_DEVICES"] == "3" and env["CUDA_VISIBLE_DEVICES"] == "3"
    assert maca.visible_devices[0] == "MACA_VISIBLE_DEVICES"
    assert "TRITON_INTERPRET" not in env
    assert maca.to_confirm  # what a MetaX runner must still confirm is written down


def test_the_interpreter_is_set_before_any_kernel_import(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert scrubbed_env("interpret")["TRITON_INTERPRET"] == "1"
    assert "TRITON_INTERPRET" not in scrubbed_env("triton")
