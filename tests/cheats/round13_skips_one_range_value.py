"""Cheat (round 13): the calls at one value of a range scalar skipped, and no rows kept for that output's shape.

The entry is ``head_scale(x, n)`` (tests/test_judge_attacks_round12.py): twice the first ``n`` columns of each row,
``n`` declared with ``range: [1, 256]``. The window's slots take four values of ``n`` in turn (runners/inputs.py
SlotBank: 1, 256 and two draws), so the output is hashed as one block of rows per shape (runners/commitments.py
``CommitPlan``). This candidate skips every timed call at ``n == 256`` (the most work: it hands back the previous
pass's output, stale) and, in its own process, makes ``node_level`` keep no rows for that shape: its digest covers
the other blocks only, nothing of the skipped slots can be opened, and they are seen only where a slot is shown in
full. The judge must hold the candidate's blocks (level, size, slots) to the oracle's. Outside the slots (the
correctness calls) it is the baseline."""
import runners.commitments as _commitments
import torch
import triton
import triton.language as tl

_previous = {}
_skipped_nbytes = set()  # the sizes of the outputs at n == 256: no rows for them
_node_level = _commitments.node_level


def _no_rows_for_skipped(nbytes, count, columns):
    return None if nbytes in _skipped_nbytes else _node_level(nbytes, count, columns)


_commitments.node_level = _no_rows_for_skipped


@triton.jit
def _head_scale_kernel(x_ptr, out_ptr, stride_x, stride_out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_out + offs, x * 2.0, mask=mask)


def _honest(x, n):
    rows, width = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _head_scale_kernel[(rows,)](x, out, x.stride(0), out.stride(0), n, BLOCK=triton.next_power_of_2(width))
    return out


def _slot(t):
    """(index, count) when ``t`` is one row of a slot block, else None."""
    numel, size = t.numel(), t.element_size()
    row = t.untyped_storage().nbytes() // size
    pad = -(-numel * size // 256) * 256 // size  # SlotBank's padded row (ALIGN 256)
    if not t.is_contiguous() or row <= numel or row % pad or t.storage_offset() % pad:
        return None
    return t.storage_offset() // pad, row // pad


def head_scale(x, n):
    if n == 256:
        _skipped_nbytes.add(x.shape[0] * n * x.element_size())
    where = _slot(x)
    if where is None or n != 256:
        return _honest(x, n)
    k, count = where
    key = (x.untyped_storage().data_ptr(), count, k)
    if key not in _previous:  # computed once (the stand-in's direct calls), then handed back stale
        _previous[key] = _honest(x, n)
    return _previous[key]
