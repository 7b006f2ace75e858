"""Cheat (round 13): a row whose inputs are small is written as zeros, each one within the absolute tolerance.

The entry is ``channel_scale(x, w)`` (tests/test_judge_attacks_round15.py): each row of ``x`` times a per-channel
weight, a linear op (a LayerScale, a norm's weight applied), here in bfloat16 (atol 1e-2). This kernel keeps a
"fast path" for rows of activations too small to matter: where every output of a row is under 9e-3 (0.9 of the
tolerance's absolute part) it stores zeros. At unit scale no row is that small; at the judge's window's smallest
input scales (one scale a pass, drawn down to 1e-3: runners/inputs.py ``SlotBank.fill``) every row but the slot's
wide one is, and the pass's outputs are mostly zeros: a relative error of 100 % on those rows.

Element by element every zero passes. A slot shown in full is held to its whole error (runners/compare.py
``_whole_output``), but as one L2 over the slot, where the wide row the judge plants in every slot (a scale of its
own up to 10^1.5, and a dynamic range to 10^1.5 more) outweighs the zeroed rows many times: most shown slots pass.
Each opened chunk of the window must be held to its own whole error at the window's scale (runners/compare.py
``scale_ratios``, ``first_bad_row``; runners/openings.py ``compare_chunks``): without that it was accepted."""
import torch
import triton
import triton.language as tl


@triton.jit
def _channel_scale_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_o, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    out = x * w
    out = tl.where(tl.max(tl.abs(out), axis=0) < 0.009, 0.0, out)  # "a row too small to matter"
    tl.store(out_ptr + row * stride_o + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def channel_scale(x, w):
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    _channel_scale_kernel[(rows,)](x, w, out, x.stride(0), out.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return out
