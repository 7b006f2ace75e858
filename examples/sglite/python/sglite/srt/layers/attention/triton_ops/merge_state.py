"""Merge two partial attention states (values and log-sum-exp) over the same queries."""
import torch
import triton
import triton.language as tl

from .device_limits import NUM_SMS


@triton.jit
def _merge_state_kernel(va_ptr, sa_ptr, vb_ptr, sb_ptr, vo_ptr, so_ptr, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    s_a = tl.load(sa_ptr + pid)
    s_b = tl.load(sb_ptr + pid)
    m = tl.maximum(s_a, s_b)
    wa = tl.exp(s_a - m)
    wb = tl.exp(s_b - m)
    d = tl.arange(0, BLOCK_D)
    mask = d < D
    a = tl.load(va_ptr + pid * D + d, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(vb_ptr + pid * D + d, mask=mask, other=0.0).to(tl.float32)
    out = (a * wa + b * wb) / (wa + wb)
    tl.store(vo_ptr + pid * D + d, out.to(vo_ptr.dtype.element_ty), mask=mask)
    tl.store(so_ptr + pid, m + tl.log(wa + wb))


def merge_state(v_a: torch.Tensor, s_a: torch.Tensor, v_b: torch.Tensor, s_b: torch.Tensor):
    """v_*: [T, H, D], s_*: [T, H] float32 -> (v, s)."""
    T, H, D = v_a.shape
    v = torch.empty_like(v_a)
    s = torch.empty_like(s_a)
    warps = 4 if T * H >= NUM_SMS else 8
    _merge_state_kernel[(T * H,)](v_a, s_a, v_b, s_b, v, s, D, BLOCK_D=triton.next_power_of_2(D), num_warps=warps)
    return v, s
