"""Helpers shared by the kernel modules (imported absolutely, as SGLang's kernels import sglang.srt.utils)."""
import torch
import triton


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def row_block(n_cols: int, cap: int = 8192) -> int:
    """The power-of-two block that covers a row (at most ``cap``)."""
    return min(triton.next_power_of_2(n_cols), cap)


def is_cuda() -> bool:
    return torch.cuda.is_available() and torch.version.hip is None


def dump_debug_tensors(name: str, **tensors) -> None:
    """Only for debugging: pulls in a profiler that is not a dependency (a lazy import nobody reaches)."""
    from sglite.srt.debug_tools import save_tensors

    save_tensors(name, tensors)
