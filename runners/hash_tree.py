"""The first levels of the commitments' hash tree (runners/timing.py ``hash_rows``) in one Triton kernel.

The tree in torch is four elementwise ops a level, each a pass over memory: hashing a window's outputs read them
about fourteen times, and on the H200 a commitment of 64 MB took 450 us (140 GB/s). In the judge's window that work
sits inside the judge's clock with the pass: at prefill sizes the commitments took ten times the pass itself, and how
much they moved from round to round was more than the clock could resolve (the baseline against itself unresolved,
and credited no speedup, at T=4096, H=4096). This kernel reads each word once and runs ``LEVELS`` levels in
registers, the same integer arithmetic as ``_compress`` (wrapping modulo 2**64), so the rest of the tree, and the
judge's recomputation on the CPU, give the same integers. Tested against the torch tree under the interpreter
(tests/test_commitments.py) and on CUDA (bench/commit_check_gpu.py)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024  # at most this many words a program reduces to one: log2 of it levels of the tree
MIN_BLOCK = 64
INTERPRETED = False  # tests set it: the kernel under TRITON_INTERPRET=1 on CPU tensors, to check it against torch


@triton.jit
def _tree_kernel(src_ptr, dst_ptr, alpha_ptr, row_words, BLOCK: tl.constexpr, LEVELS: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)
    block = tl.program_id(0).to(tl.int64)
    offs = block * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src_ptr + row * row_words + offs).to(tl.uint64, bitcast=True)
    for level in tl.static_range(LEVELS):
        a, b = tl.split(tl.reshape(x, (BLOCK >> (level + 1), 2)))  # words 2i and 2i+1
        alpha = tl.load(alpha_ptr + level).to(tl.uint64, bitcast=True)
        u = a + alpha * b
        u = (u << 32) | (u >> 32)  # rot32: the two 32-bit halves swapped
        x = u * (2 * b + 1) + a
    out = block * (BLOCK >> LEVELS) + tl.arange(0, BLOCK >> LEVELS)
    tl.store(dst_ptr + row * (row_words >> LEVELS) + out, x.to(tl.int64, bitcast=True))


def levels(words: torch.Tensor) -> int:
    """How many first levels the kernel takes of this (rows, n) int64 block: log2 of the largest power of two up to
    BLOCK that divides n and leaves at least two blocks a row; 0 where it does not pay (under MIN_BLOCK words, or
    on a CPU, where the torch tree is cheaper than the interpreter)."""
    n = words.shape[1]
    if not (words.is_cuda or INTERPRETED) or not words.is_contiguous() or n < 2 * MIN_BLOCK:
        return 0
    block = min(BLOCK, n & -n, n // 2)
    return block.bit_length() - 1 if block >= MIN_BLOCK else 0


def first_levels(words: torch.Tensor, alphas: torch.Tensor) -> torch.Tensor:
    """Levels 0..L-1 of the tree over each row of ``words`` ((rows, n) int64, n a multiple of 2**L), with ``alphas``
    the levels' odd constants (an int64 tensor of L values on the same device; a captured plan's views of its
    table): L is ``len(alphas)``. Returns (rows, n / 2**L) int64."""
    rows, n = words.shape
    count = alphas.shape[0]
    block = 1 << count
    out = torch.empty((rows, n // block), dtype=torch.int64, device=words.device)
    _tree_kernel[(n // block, rows)](words, out, alphas.contiguous(), n, BLOCK=block, LEVELS=count)
    return out
