"""Cheat (round 12, written while closing it): calls skipped where an output's shape follows a range scalar.

The entry is ``head_scale(x, n)``: twice the first ``n`` columns of each row, ``n`` a scalar declared with ``range:``.
The judge's slots take four values of ``n`` in turn (runners/inputs.py SlotBank), so the output's shape differs from
slot to slot. The window's commitments kept chunk-level rows only for an output of one shape in every slot: this one
had none, nothing of it was opened, and skipped calls were seen only in the few slots shown in full. This candidate
skips the second half of the slots of every timed pass (it hands back the previous pass's output, stale, and
launches nothing); outside the slots (the correctness calls) it is the baseline."""
import torch
import triton
import triton.language as tl

_previous = {}


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
    where = _slot(x)
    if where is None:
        return _honest(x, n)
    k, count = where
    if k < count // 2:
        return _honest(x, n)
    key = (x.untyped_storage().data_ptr(), count, k)
    if key not in _previous:  # computed once (the stand-in's direct calls), then handed back stale
        _previous[key] = _honest(x, n)
    return _previous[key]
