"""Control for tests/cheats/rewrites_the_judges_code.py: a kernel that returns zeros (one token Triton launch of
its own). An honest oracle refuses it at correctness; an oracle that a previous candidate compromised does not."""
import torch
import triton
import triton.language as tl


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    _token_kernel[(1,)](hidden_states, scratch)
    out = torch.zeros_like(hidden_states)
    return out if residual is None else (out, torch.zeros_like(hidden_states))
