"""What Triton's CPU interpreter lacks and compiled Triton has, for code that runs unchanged on a GPU.

Two gaps of the interpreter (``TRITON_INTERPRET=1``) stop real repositories before their kernels run:

- **no active driver**: ``triton.runtime.driver.active`` raises "0 active drivers" without a GPU, and engines
  ask it at import time which backend they run on (LMDeploy's ``is_cuda()``, flash-linear-attention's device
  detection). ``install()`` puts in a stand-in whose target is ``cpu``: ``is_cuda()``-style checks answer
  no, and anything that needs a real device (``utils.get_device_properties``) raises an error that says so;
- **a grid given as a list** (``grid = [batch]``, or a grid function returning a list): compiled Triton takes
  any sequence, the interpreter pads it with a tuple and fails with "can only concatenate list". The
  interpreter's launch gets the grid as a tuple.

Only the standard library, torch and triton are used: the file runs in the target's own Python (the capture
plugin and the import check copy or import it), and on a GPU ``install()`` does nothing.
"""
from __future__ import annotations

import functools
import os

NO_GPU = "no GPU: kernelsmith runs this on Triton's CPU interpreter (--backend interpret)"


class _Utils:
    def get_device_properties(self, *args, **kwargs):
        raise RuntimeError(f"{NO_GPU}; device properties exist on a GPU only")


class InterpreterDriver:
    """Answers what code asks a Triton driver about the device, for the CPU interpreter."""

    utils = _Utils()

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cpu", 0, 32)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device) -> None:
        return None

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def get_device_interface(self):
        import torch

        return torch.cpu

    def get_benchmarker(self):
        def bench(fn, *args, **kwargs):  # the interpreter measures no speed: every config costs the same
            fn()
            return 1.0
        return bench

    def get_empty_cache_for_benchmark(self):
        import torch

        return torch.empty(0)

    def clear_cache(self, cache) -> None:
        return None

    def __repr__(self) -> str:
        return "InterpreterDriver(cpu)"


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def install_driver() -> bool:
    """Make ``triton.runtime.driver.active`` answer on the interpreter when no GPU driver is active."""
    from triton.runtime.driver import driver as config

    try:
        config.active  # a real driver (a GPU next to the interpreter) stays
        return False
    except RuntimeError:
        pass
    stand_in = InterpreterDriver()
    config._default = stand_in
    config.set_active(stand_in)
    return True


def _tuple_grid(grid):
    if isinstance(grid, list):
        return tuple(grid)
    if callable(grid):
        @functools.wraps(grid)
        def as_tuple(meta):
            out = grid(meta)
            return tuple(out) if isinstance(out, list) else out
        return as_tuple
    return grid


def install_grid() -> bool:
    """The interpreter's launch takes a list grid as compiled Triton does."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - older Triton
        return False
    run = InterpretedFunction.run
    if getattr(run, "__ks_tuple_grid__", False):
        return False

    @functools.wraps(run)
    def launch(self, *args, grid, warmup, **kwargs):
        return run(self, *args, grid=_tuple_grid(grid), warmup=warmup, **kwargs)

    launch.__ks_tuple_grid__ = True
    InterpretedFunction.run = launch
    return True


def install() -> list[str]:
    """Both shims, on the interpreter only; returns which were put in."""
    if not _interpreting():
        return []
    done = []
    if install_driver():
        done.append("driver")
    if install_grid():
        done.append("grid")
    return done
