"""Cheat: the work is done by torch (float32 math in aten kernels), and one token Triton kernel of the
candidate's own is launched per call (it writes one element of a scratch buffer), so that "launched a Triton
kernel of its own" holds. It must be refused ('kernel' stage): on a GPU the judge profiles the call and the
candidate's own kernels must carry a share of its device time comparable to the baseline's (GPU only: the
interpreter has no profiler, so on the CPU it passes)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    _token_kernel[(1,)](hidden_states, scratch)
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))
