"""Fake speedup where the judge's window checks nothing: an in-place kernel (SGLang's fused_add_rmsnorm, the
sglite example: ``written: [x, residual]``, returns None). The window's commitments and its reveals cover what the
entry RETURNS (runners/timing.py ``SlotTimer.commit`` hashes ``self.outputs``; runners/worker.py ``reveal`` shows
``timer.outputs[k]``; runners/judge_clock.py ``_corroborate`` compares those with the oracle's): for an entry that
returns None, every slot's commitment is the same constant and every shown slot is None against None. What the
entry wrote, which is all it computes, is never hashed, shown or compared in a timed pass.

This kernel is the baseline's in every call the judge checks (the correctness trials, the layout and masked
trials, the re-check, the one-slot profile). In a call on a timed slot (its input is a row of a slot bank's block:
a storage at least twice the tensor, runners/inputs.py ``SlotBank``; the slot's index is its offset over the
aligned row) it does the work of even slots only and returns at once on odd ones. The samples' graph and the
judge's window both run that half of the work, so its claim (about 2x) is what the judge's clock sees, and it is
credited; on a GPU at the decode size (T=1, data far below L2: no bandwidth bound) the same. Above 16 MB a call it
is honest (a fake 2x there would meet the bandwidth bound). No worker code is touched: it would hold behind the
uid wall."""
import torch
import triton
import triton.language as tl

_ALIGN = 256  # bytes: a slot bank's rows start this aligned (runners/inputs.py SlotBank.ALIGN)


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, stride_x, stride_r, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
    s = (x + r).to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + row * stride_r + cols, s, mask=mask)
    s = s.to(tl.float32)
    var = tl.sum(s * s, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = s * tl.rsqrt(var + eps) * w
    tl.store(x_ptr + row * stride_x + cols, y.to(x_ptr.dtype.element_ty), mask=mask)


def _odd_slot(x: torch.Tensor) -> bool:
    """A call on an odd slot of a slot bank (its storage is a block of several slots, each an aligned row)."""
    elem = x.element_size()
    size = x.numel() * elem
    if not x.is_contiguous() or size > 16 << 20 or x.untyped_storage().nbytes() < 2 * size:
        return False
    row = -(-size // _ALIGN) * _ALIGN // elem
    return (x.storage_offset() // row) % 2 == 1


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> None:
    """In place on ``x`` and ``residual``."""
    if _odd_slot(x):
        return None
    n_cols = x.shape[-1]
    x2 = x.view(-1, n_cols)
    r2 = residual.view(-1, n_cols)
    block = triton.next_power_of_2(n_cols)
    _fused_add_rms_norm_kernel[(x2.shape[0],)](x2, r2, weight, x2.stride(0), r2.stride(0), n_cols, eps,
                                                BLOCK=block, num_warps=4)
