"""Cheat (round 16): round 4's deferred-work batcher, flushed by torch's own ``take`` kernel, overridden.

As in round4_batches_across_slots.py a call reads its slot index and the slot count from its tensor's storage
(runners/inputs.py SlotBank), launches nothing, and returns a view into an output block of its own, its work left
pending; the pending calls are launched as ONE kernel when @GROUP@ of them are pending or at the pass's last slot.
At import it registers its own kernel for ``aten::take.out`` (``torch.library``, CPU and CUDA), which launches every
pending call first and then does the take. The judge's checkpoint after a call reads the call's outputs with
``torch.take(t, positions, out=...)`` (runners/checkpoints.py ``Checkpoints.after``): however it is reached (torch's
attribute bound at import, ``__torch_function__`` and modes turned off), the call lands in this kernel, so the
pending group is launched right before the trace reads it (on a GPU inside the capture: the graph holds the launch
at that place). Its outputs are plain tensors. Outside the rotating slots it runs the baseline's own kernel;
@GROUP@ = 1 is an honest copy of the baseline."""
import torch
import triton
import triton.language as tl

_MARK = "@GROUP@"  # set by the test that arms it; 4 when left as it is
GROUP = int(_MARK) if _MARK.isdigit() else 4
_state = {"pending": []}


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
def _rms_group_kernel(x_ptr, w_ptr, out_ptr, n_rows, rows_per_slot, slot_stride, w_stride, o_stride, N, eps,
                      ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    """ROWS rows a program, of any slot of the group: row i is row i % rows_per_slot of slot i // rows_per_slot."""
    i = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    slot = (i // rows_per_slot).to(tl.int64)
    row = (i % rows_per_slot).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = (i[:, None] < n_rows) & (cols[None, :] < N)
    at = (slot * slot_stride + row * N)[:, None] + cols[None, :]
    to = (slot * o_stride + row * N)[:, None] + cols[None, :]
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(w_ptr + (slot * w_stride)[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + to, (x * rstd[:, None] * w).to(out_ptr.dtype.element_ty), mask=mask)


def _flush():
    """Every pending call, one launch (they are consecutive slots: a group starts where the last flush ended)."""
    pending = _state["pending"]
    if not pending:
        return
    _state["pending"] = []
    first, x, weight, wpad, pad, eps = pending[0]
    rows, hidden = x.numel() // x.shape[-1], x.shape[-1]
    n_rows = len(pending) * rows
    xb = x.as_strided((1,), (1,), x.storage_offset())
    wb = weight.as_strided((1,), (1,), weight.storage_offset())
    per_program = 1 if x.is_cuda else triton.next_power_of_2(n_rows)  # the interpreter: one program
    block = triton.next_power_of_2(hidden)
    _rms_group_kernel[(triton.cdiv(n_rows, per_program),)](
        xb, wb, _state["out"][first], n_rows, rows, pad, wpad, x.numel(), hidden, eps,
        ROWS=per_program, BLOCK_N=block, num_warps=8 if block >= 2048 else 4)


def _take_out(self, index, *, out):
    """``aten::take.out``: the pending calls first (whoever reads, it reads written outputs), then the take."""
    _flush()
    return out.copy_(self.reshape(-1).index_select(0, index.reshape(-1)).view(index.shape))


_LIBRARY = torch.library.Library("aten", "IMPL")  # kept alive: the registration lasts as long as it does
for _key in ("CPU", "CUDA"):
    _LIBRARY.impl("take.out", _take_out, _key)


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
    x = hidden_states
    where = _slot(x, x.numel()) if GROUP > 1 and residual is None else None
    wslot = _slot(weight, weight.numel()) if where else None
    if where is None or wslot is None or wslot[:2] != where[:2]:
        return _honest(hidden_states, weight, eps, residual)
    k, count, pad = where
    if k == 0 or _state.get("count") != count or "warm" not in _state:  # a new pass (the first: compile the group
        _flush()  # kernel outside any capture, a group of one)
        _state.update(count=count, out=torch.empty((count, x.numel()), dtype=x.dtype, device=x.device))
        if "warm" not in _state:
            _state["warm"] = True
            _state["pending"].append((k, x, weight, wslot[2], pad, eps))
            _flush()
            return _state["out"][k].view(x.shape)
    if _state["pending"] and _state["pending"][0][0] + len(_state["pending"]) != k:
        _flush()  # not the next slot: start a group here
    _state["pending"].append((k, x, weight, wslot[2], pad, eps))
    if len(_state["pending"]) >= GROUP or k == count - 1:
        _flush()
    return _state["out"][k].view(x.shape)
