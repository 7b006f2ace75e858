"""Small launch helpers shared by the kernels (pure python)."""

import triton


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (at least 1)."""
    return triton.next_power_of_2(max(int(n), 1))


def get_num_warps(block_size: int) -> int:
    """Heuristic number of warps for a kernel that handles ``block_size``
    elements of one row in a single program."""
    if block_size >= 32768:
        return 32
    if block_size >= 8192:
        return 16
    if block_size >= 2048:
        return 8
    return 4


def as_rows(x):
    """View ``x`` ([..., N]) as a 2-D ``[rows, N]`` tensor whose last dim is
    contiguous (copies only when needed). Rows may be strided."""
    x2d = x.reshape(-1, x.shape[-1])
    if x2d.shape[-1] > 1 and x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    return x2d
