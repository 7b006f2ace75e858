"""Cheat (round 16): work done ahead of its calls where the judge's link lands in an input of one value.

The judge's checkpoints (runners/checkpoints.py) link ONE input into the next call: ``draw`` picks the first
floating-point tensor argument the entry does not write, whatever it is, and the link overwrites a few of its values
with values of that same input at other places. Here (a bundle of the test's own, ``five_parts(alpha, x, w)``) that
argument is ``alpha``, a per-call scale of one element: every value the link can write is the one already there, so
the link changes nothing. As in round4_computes_ahead_of_its_calls.py a call reads its slot index and the slot count
from its tensor's storage (runners/inputs.py SlotBank); the FIRST call of each group of @GROUP@ launches one kernel
that computes all five outputs of the whole group from the inputs already lying in the later slots, and the later
calls launch nothing. Every output is written before its call returns (the traces hold) and no input it read ahead
is changed afterwards (the link is a no-op), so the judge sees right outputs everywhere. Outside the rotating slots
it runs the baseline's kernels; @GROUP@ = 1 is an honest copy of the baseline (the control)."""
import torch
import triton
import triton.language as tl

_MARK = "@GROUP@"  # set by the test that arms it; 4 when left as it is
GROUP = int(_MARK) if _MARK.isdigit() else 4
_state = {}


@triton.jit
def _parts_kernel(x_ptr, w_ptr, y0_ptr, y1_ptr, y2_ptr, y3_ptr, N, BLOCK: tl.constexpr):
    """The baseline's first kernel: four elementwise parts of a row."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=0.0)
    w = tl.load(w_ptr + offs, mask=m, other=0.0)
    tl.store(y0_ptr + row * N + offs, x * w, mask=m)
    tl.store(y1_ptr + row * N + offs, x + w, mask=m)
    tl.store(y2_ptr + row * N + offs, x - w, mask=m)
    tl.store(y3_ptr + row * N + offs, x * x, mask=m)


@triton.jit
def _norm_kernel(alpha_ptr, x_ptr, w_ptr, y4_ptr, N, BLOCK: tl.constexpr):
    """The baseline's second kernel: the row's RMS norm, scaled by alpha."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=0.0)
    w = tl.load(w_ptr + offs, mask=m, other=0.0)
    a = tl.load(alpha_ptr)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + 1e-6)
    tl.store(y4_ptr + row * N + offs, x * rstd * w * a, mask=m)


@triton.jit
def _group_kernel(a_ptr, x_ptr, w_ptr, y0_ptr, y1_ptr, y2_ptr, y3_ptr, y4_ptr, n_rows, rows_per_slot, a_stride,
                  x_stride, w_stride, o_stride, N, PARTS: tl.constexpr, NORM: tl.constexpr, ROWS: tl.constexpr,
                  BLOCK: tl.constexpr):
    """Both kernels' work (or one of them) for ROWS rows a program, of any slot of a group of consecutive slots:
    row i is row i % rows_per_slot of slot i // rows_per_slot, each slot's inputs a row of its block."""
    i = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    slot = (i // rows_per_slot).to(tl.int64)
    row = (i % rows_per_slot).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = (i[:, None] < n_rows) & (cols[None, :] < N)
    at = (slot * x_stride + row * N)[:, None] + cols[None, :]
    to = (slot * o_stride + row * N)[:, None] + cols[None, :]
    x = tl.load(x_ptr + at, mask=mask, other=0.0)
    w = tl.load(w_ptr + (slot * w_stride)[:, None] + cols[None, :], mask=mask, other=0.0)
    if PARTS:
        tl.store(y0_ptr + to, x * w, mask=mask)
        tl.store(y1_ptr + to, x + w, mask=mask)
        tl.store(y2_ptr + to, x - w, mask=mask)
        tl.store(y3_ptr + to, x * x, mask=mask)
    if NORM:
        a = tl.load(a_ptr + slot * a_stride, mask=i < n_rows, other=0.0)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + 1e-6)
        tl.store(y4_ptr + to, x * rstd[:, None] * w * a[:, None], mask=mask)


def _slot(t):
    """(index, count, padded row in elements) when ``t`` is one row of a slot block (runners/inputs.py SlotBank:
    rows of ALIGN = 256 bytes), else None."""
    numel = t.numel()
    row = t.untyped_storage().nbytes() // t.element_size()
    if not t.is_contiguous() or row <= numel:
        return None
    pad = -(-numel * t.element_size() // 256) * 256 // t.element_size()
    if row % pad or t.storage_offset() % pad:
        return None
    return t.storage_offset() // pad, row // pad, pad


def _honest(alpha, x, w):
    x = x.contiguous()
    T, N = x.shape
    ys = [torch.empty_like(x) for _ in range(5)]
    block = triton.next_power_of_2(N)
    _parts_kernel[(T,)](x, w, ys[0], ys[1], ys[2], ys[3], N, BLOCK=block)
    _norm_kernel[(T,)](alpha, x, w, ys[4], N, BLOCK=block)
    return tuple(ys)


def _slots(alpha, x, w):
    """(k, count, (alpha's, x's, w's padded rows)) when the three are row k of blocks of the same count, else None."""
    where = [_slot(t) for t in (alpha, x, w)]
    if GROUP < 2 or None in where or len({(k, n) for k, n, _ in where}) != 1:
        return None
    return where[0][0], where[0][1], tuple(p for _, _, p in where)


def _launch(first, n, alpha, x, w, pads, parts, norm):
    """The group kernel over slots first .. first + n - 1, from the inputs in their slots (``alpha``, ``x``, ``w``:
    slot ``first``'s), into the cheat's own output blocks."""
    T, N = x.shape
    n_rows = n * T
    per_program = 1 if x.is_cuda else triton.next_power_of_2(n_rows)  # the interpreter: one program
    ys = [o[first] for o in _state["out"]]
    _group_kernel[(triton.cdiv(n_rows, per_program),)](
        alpha, x, w, *ys, n_rows, T, pads[0], pads[1], pads[2], x.numel(), N, PARTS=parts, NORM=norm,
        ROWS=per_program, BLOCK=triton.next_power_of_2(N))


def _blocks(count, x):
    if _state.get("count") != count:
        _state.update(count=count, out=[torch.empty((count, x.numel()), dtype=x.dtype, device=x.device)
                                        for _ in range(5)])


def five_parts(alpha, x, w):
    where = _slots(alpha, x, w)
    if where is None:
        return _honest(alpha, x, w)
    k, count, pads = where
    _blocks(count, x)
    if k % GROUP == 0:  # the group's first call: the whole group, from the inputs in the later slots
        _launch(k, min(GROUP, count - k), alpha, x, w, pads, True, True)
    return tuple(o[k].view(x.shape) for o in _state["out"])
