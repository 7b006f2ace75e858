"""Cheat (round 4): calls skipped where the judge's window shows too few of them to notice.

The judge's window shows `reveal` slots a round, chosen in secret: 16, but at large sizes only as many as fit
its fetch budget (runners/judge_clock.py _corroborate: `min(count, max(2, max_fetch_bytes // per_slot), 16)`),
which is 2 slots of 13-48 at the prefill sizes of the example configs (RMSNorm T=4096: 2 of 47; silu_and_mul
T=4096: 2 of 13). In a timed pass (a slot of a block: runners/inputs.py SlotBank) at sizes of at least
@MIN_NUMEL@ elements a tensor, this candidate skips the last twelfth of the slots (at least one): it hands back
that slot's output of the previous pass, stale (in a captured graph: an output nothing writes), and launches
nothing. Its commitments are those of the stale
outputs, so they agree with what it shows; only a shown skipped slot gives it away: at RMSNorm's T=4096 (3 of 47
skipped, 2 shown a round, 3 rounds) one evaluation in three per case, about one in two over its two T=4096
cases. A fake speedup of a twelfth at those sizes, and a kernel that skips calls, kept the other times. Outside
the slots (the correctness calls) it is the baseline's kernel."""
import torch
import triton
import triton.language as tl

_MARK = "@MIN_NUMEL@"  # set by the test that arms it; 2**24 (the GPU form: RMSNorm's T=4096 case) when left as is
MIN_NUMEL = int(_MARK) if _MARK.isdigit() else 1 << 24
_previous = {}


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


def _honest(hidden_states, weight, eps, residual):
    shape, hidden = hidden_states.shape, hidden_states.shape[-1]
    x = hidden_states.reshape(-1, hidden)
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty((x.shape[0], hidden), dtype=x.dtype, device=x.device)
    res = residual.reshape(-1, hidden) if residual is not None else x
    if res.stride(-1) != 1:
        res = res.contiguous()
    res_out = torch.empty_like(out) if residual is not None else out
    block = triton.next_power_of_2(hidden)
    _rms_norm_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.stride(0), res.stride(0), out.stride(0),
                                    res_out.stride(0), hidden, eps, HAS_RESIDUAL=residual is not None,
                                    BLOCK_N=block, num_warps=8 if block >= 2048 else 4)
    return (out.view(shape), res_out.view(shape)) if residual is not None else out.view(shape)


def _slot(t):
    """(index, count) when ``t`` is one row of a slot block, else None."""
    numel, size = t.numel(), t.element_size()
    row = t.untyped_storage().nbytes() // size
    pad = -(-numel * size // 256) * 256 // size  # SlotBank's padded row (ALIGN 256)
    if not t.is_contiguous() or row <= numel or row % pad or t.storage_offset() % pad:
        return None
    return t.storage_offset() // pad, row // pad


def rms_norm(hidden_states: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, residual: torch.Tensor = None):
    where = _slot(hidden_states)
    if where is None or hidden_states.numel() < MIN_NUMEL:
        return _honest(hidden_states, weight, eps, residual)
    k, count = where
    key = (hidden_states.untyped_storage().data_ptr(), count, k)
    if k < count - max(1, count // 12):
        return _honest(hidden_states, weight, eps, residual)
    if key not in _previous:  # a skipped slot: computed once on direct calls (the stand-in), never in a graph
        if hidden_states.is_cuda and torch.cuda.is_current_stream_capturing():  # an output nothing ever writes
            out = torch.empty_like(hidden_states)
            _previous[key] = (out, torch.empty_like(out)) if residual is not None else out
        else:
            _previous[key] = _honest(hidden_states, weight, eps, residual)
    return _previous[key]  # the last twelfth: the previous pass's output (or nothing), nothing launched
