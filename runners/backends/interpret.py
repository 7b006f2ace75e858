"""Triton's CPU interpreter: kernels run as numpy on the host. Correctness only; its times are never speeds.

``TRITON_INTERPRET`` is read when ``@triton.jit`` runs, so it is set in the worker's environment before any
kernel module is imported. Autotuning cannot benchmark here: both sides run the first config.
"""
from .base import Backend

INTERPRET = Backend(
    name="interpret",
    device="cpu",
    timed=False,
    warp_size=32,
    env_set={"TRITON_INTERPRET": "1"},
    address_space_limit=8 << 30,  # torch and Triton take under 1 GiB of address space; a bomb fails in its worker
)
