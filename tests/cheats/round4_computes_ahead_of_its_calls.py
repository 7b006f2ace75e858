"""Cheat (round 4's batcher turned around): work done ahead of its calls, for a group of calls in one launch.

As in round4_batches_across_slots.py, a call reads its slot index and the slot count from its tensor's storage
(runners/inputs.py SlotBank lays every argument's slots out as rows of one padded block). Here the FIRST call of each
group of @GROUP@ launches ONE kernel over the rows of the whole group, from the inputs that already lie in the later
slots, and the later calls of the group launch nothing: each returns a view of the output computed ahead. Every
output is written before its call returns (a check of a call's outputs right after it holds), so what it exploits is
that the later calls' inputs are final before those calls begin; a real caller's next input is often the output of
this call. Outside the rotating slots it runs the baseline's own kernel; @GROUP@ = 1 is an honest copy (the
control)."""
import torch
import triton
import triton.language as tl

_MARK = "@GROUP@"  # set by the test that arms it; 4 (the GPU form) when left as it is
GROUP = int(_MARK) if _MARK.isdigit() else 4
_state = {}


@triton.jit
def _rms_norm_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, stride_x_row, stride_residual_row,
                     stride_out_row, stride_residual_out_row, N, eps, HAS_RESIDUAL: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    """The baseline's kernel, one program per row."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        res = tl.load(residual_ptr + row * stride_residual_row + offs, mask=mask, other=0.0)
        x = x + res.to(tl.float32)
        tl.store(residual_out_ptr + row * stride_residual_out_row + offs, x.to(residual_out_ptr.dtype.element_ty),
                 mask=mask)
    variance = tl.sum(x * x, axis=0) / N
    rstd = tl.rsqrt(variance + eps)
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out_row + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_group_kernel(x_ptr, r_ptr, w_ptr, out_ptr, rout_ptr, n_rows, rows_per_slot, slot_stride, w_stride,
                      o_stride, N, eps, HAS_RESIDUAL: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    """ROWS rows a program, of any slot of the group: row i is row i % rows_per_slot of slot i // rows_per_slot."""
    i = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    slot = (i // rows_per_slot).to(tl.int64)
    row = (i % rows_per_slot).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = (i[:, None] < n_rows) & (cols[None, :] < N)
    at = (slot * slot_stride + row * N)[:, None] + cols[None, :]
    to = (slot * o_stride + row * N)[:, None] + cols[None, :]
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(r_ptr + at, mask=mask, other=0.0).to(tl.float32)
        tl.store(rout_ptr + to, x.to(rout_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(w_ptr + (slot * w_stride)[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + to, (x * rstd[:, None] * w).to(out_ptr.dtype.element_ty), mask=mask)


def _slot(t, numel):
    """(index, count, padded row in elements) when ``t`` is one row of a slot block, else None."""
    row = t.untyped_storage().nbytes() // t.element_size()
    if not t.is_contiguous() or row <= numel:
        return None
    pad = -(-numel * t.element_size() // 256) * 256 // t.element_size()  # SlotBank's padded row (ALIGN 256)
    if row % pad or t.storage_offset() % pad:
        return None
    return t.storage_offset() // pad, row // pad, pad


def _honest(hidden_states, weight, eps, residual):
    shape, hidden = hidden_states.shape, hidden_states.shape[-1]
    x = hidden_states.reshape(-1, hidden)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    res = residual.reshape(-1, hidden) if residual is not None else x
    res_out = torch.empty_like(out) if residual is not None else out
    block = triton.next_power_of_2(hidden)
    _rms_norm_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.stride(0), res.stride(0), out.stride(0),
                                    res_out.stride(0), hidden, eps, HAS_RESIDUAL=residual is not None,
                                    BLOCK_N=block, num_warps=8 if block >= 2048 else 4)
    return (out.view(shape), res_out.view(shape)) if residual is not None else out.view(shape)


def rms_norm(hidden_states: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, residual: torch.Tensor = None):
    shape, hidden = hidden_states.shape, hidden_states.shape[-1]
    x = hidden_states
    where = _slot(x, x.numel()) if GROUP > 1 else None
    wslot = _slot(weight, weight.numel()) if where else None
    if where is None or wslot is None or wslot[:2] != where[:2] or \
            (residual is not None and _slot(residual, residual.numel()) != where):
        return _honest(hidden_states, weight, eps, residual)
    k, count, pad = where
    rows = x.numel() // hidden
    if k == 0 or _state.get("count") != count:  # a new pass: outputs for every slot, in blocks of our own
        _state.update(count=count, out=torch.empty((count, x.numel()), dtype=x.dtype, device=x.device),
                      rout=torch.empty((count, x.numel()), dtype=x.dtype, device=x.device))
    out, rout = _state["out"], _state["rout"]
    group_start = k % GROUP == 0
    if group_start:  # the group's first call: one launch for the whole group, later slots' inputs included
        first = k
        n_rows = (min(k + GROUP, count) - first) * rows
        base = x.storage_offset()
        xb = x.as_strided((1,), (1,), base)
        rb = residual.as_strided((1,), (1,), base) if residual is not None else xb
        wb = weight.as_strided((1,), (1,), weight.storage_offset())
        per_program = 1 if x.is_cuda else triton.next_power_of_2(n_rows)  # the interpreter: one program
        block = triton.next_power_of_2(hidden)
        _rms_group_kernel[(triton.cdiv(n_rows, per_program),)](
            xb, rb, wb, out[first], rout[first], n_rows, rows, pad, wslot[2], x.numel(), hidden, eps,
            HAS_RESIDUAL=residual is not None, ROWS=per_program, BLOCK_N=block, num_warps=8 if block >= 2048 else 4)
    o = out[k].view(shape)
    return (o, rout[k].view(shape)) if residual is not None else o
