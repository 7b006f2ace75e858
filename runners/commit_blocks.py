"""The blocks of a window's commitments (runners/commitments.py ``CommitPlan``): a tensor column's slots that share a
shape and dtype, hashed as the rows of one tree launch, read where they lie or copied into one block.

The copy path copies every member's output into one zero-padded (slots, padded bytes) block and the tree folds its
rows. That copy read and wrote every output byte once more than the tree needs: on the H200 a commitment of 3 GB of
outputs took 5-6 ms and moved by about 0.9 ms from round to round, inside the judge's clock. In place, the first
launch of the tree (runners/hash_tree.py ``fold_table``) reads each member's output at its address in a table made
once with the plan (a graph's outputs never move; the plan keeps them alive), zeros beyond its bytes: the integers
of the padded block, with no block allocated. Only where that is exact and cheap: every source contiguous, 8-byte
aligned, a whole number of words, a first launch of at least one level at or below the level whose nodes the digest
keeps (``CommitPlan.levels``: at level 0 the block is those nodes), on CUDA (or the interpreter, in tests).
"""
from __future__ import annotations

import dataclasses

import torch

from . import hash_tree


@dataclasses.dataclass
class Block:
    """A tensor column's slots that share a shape and dtype: one row of the tree each."""
    members: tuple | None  # the slots (None: every slot)
    nbytes: int
    words: int  # the row's padded words (runners/commitments.py ``_padded_words``)
    srcs: list  # each member's output, as integers of its element size
    index: torch.Tensor | None  # the members as a device tensor (None: every slot)
    readable: bool  # every source may be read where it lies (``readable``)
    block: torch.Tensor | None = None  # copy path: (slots, 8 * words) uint8, made at its first use
    dsts: list = dataclasses.field(default_factory=list)  # copy path: each member's row of the block, as its source
    table: torch.Tensor | None = None  # in place: (slots,) int64, the sources' addresses, on the device
    first: int = 0  # in place: the levels the first launch takes

    def plan(self, keep: int | None, device: torch.device) -> None:
        """Hash in place where it is safe, else leave the block to the copy path (made at its first use): in place
        where the sources are ``readable``, the tree kernel takes a first launch of rows of this many words
        (``hash_tree.step_words``: at least MIN_WORDS, even, on CUDA, a backend that compiles it) and the level
        whose nodes the digest keeps (``keep``) is not 0 (then the block is those nodes); the first launch stops at
        ``keep``, as the copy path's does."""
        if not self.readable or keep == 0:
            return
        levels = hash_tree.step_words(self.words, device)
        self.first = levels if keep is None else min(levels, keep)
        if self.first:
            self.table = torch.tensor([s.data_ptr() for s in self.srcs], dtype=torch.int64, device=device)

    def copied(self, device: torch.device) -> torch.Tensor:
        """The copy path: the members' outputs copied into the zero-padded block (on the plan's device, made at its
        first use), as (slots, words) int64."""
        if self.block is None:
            self.block = torch.zeros((len(self.srcs), 8 * self.words), dtype=torch.uint8, device=device)
            self.dsts = [row[:self.nbytes].view(s.dtype).view(s.shape) for row, s in zip(self.block.unbind(0),
                                                                                         self.srcs)]
        torch._foreach_copy_(self.dsts, self.srcs)
        return self.block.view(torch.int64)

    def nodes(self, alphas, device: torch.device) -> tuple[torch.Tensor, int]:
        """The rows as the tree's nodes at some level, and that level: in place, the first ``first`` levels over
        the outputs where they lie (``alphas(count)``: those levels' constants, on the device), the integers of
        ``hash_tree.fold_levels`` over the copy; else the copy itself (level 0)."""
        if self.table is not None:
            try:
                return hash_tree.fold_table(self.table, self.nbytes // 8, self.words, alphas(self.first)), self.first
            except Exception as exc:  # noqa: BLE001 - a backend that cannot compile it: the copy, the torch levels
                hash_tree.BROKEN.append(f"{type(exc).__name__}: {exc}"[:300])
                self.table, self.first = None, 0
        return self.copied(device), 0


def readable(srcs: list, originals: list, nbytes: int, device: torch.device) -> bool:
    """Whether the tree's first launch may read these sources (``_bits`` of ``originals``) where they lie: each
    contiguous, a view of its output (not a copy ``_bits`` made), 8-byte aligned, on the plan's device, and a whole
    number of words long (the kernel reads words; a tail of 1-7 bytes goes the copy path)."""
    if nbytes % 8 or not srcs:
        return False
    return all(s.is_contiguous() and t.is_contiguous() and s.data_ptr() == t.data_ptr() and s.data_ptr() % 8 == 0
               and s.device == device for s, t in zip(srcs, originals))
