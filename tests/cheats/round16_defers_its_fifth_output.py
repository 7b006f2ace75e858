"""Cheat (round 16): round 4's deferred work, for the one output the judge's checkpoints do not trace.

A checkpoint traces the first ``MAX_LEAVES`` = 4 tensor outputs of a call (runners/checkpoints.py
``Checkpoints.after``). This entry (a bundle of the test's own, ``five_parts(alpha, x, w)``) returns five: four
elementwise parts of ``x`` and ``w`` (one kernel) and an RMS norm of ``x`` scaled by ``alpha`` (a second kernel).
As in round4_batches_across_slots.py a call reads its slot index and the slot count from its tensor's storage
(runners/inputs.py SlotBank). Each call runs the first kernel, so the four traced outputs are written when it returns;
the fifth is left pending, and the last call of each group of @GROUP@ (and the pass's last) launches ONE kernel for the
pending calls' fifth outputs. Every output is right when the pass ends (commitments, shown slots, openings) and the
traces read only the four written ones. Outside the rotating slots it runs the baseline's kernels; @GROUP@ = 1 is an
honest copy of the baseline (the control)."""
import torch
import triton
import triton.language as tl

_MARK = "@GROUP@"  # set by the test that arms it; 6 when left as it is
GROUP = int(_MARK) if _MARK.isdigit() else 6
_state = {"pending": []}


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


def _flush():
    pending, _state["pending"] = _state["pending"], []
    if pending:
        first, alpha, x, w, pads = pending[0]
        _launch(first, len(pending), alpha, x, w, pads, False, True)


def five_parts(alpha, x, w):
    where = _slots(alpha, x, w)
    if where is None:
        return _honest(alpha, x, w)
    k, count, pads = where
    _blocks(count, x)
    pending = _state["pending"]
    if pending and pending[0][0] + len(pending) != k:  # not the next slot (a new pass): what is left, now
        _flush()
    T, N = x.shape
    ys = [o[k].view(x.shape) for o in _state["out"]]
    _parts_kernel[(T,)](x, w, ys[0], ys[1], ys[2], ys[3], N, BLOCK=triton.next_power_of_2(N))  # traced: now
    _state["pending"].append((k, alpha, x, w, pads))  # the fifth: later
    if len(_state["pending"]) >= GROUP or k == count - 1 or not _state.get("warm"):
        _state["warm"] = True  # the first call of all compiles the group kernel (a group of one), outside a capture
        _flush()
    return tuple(ys)
