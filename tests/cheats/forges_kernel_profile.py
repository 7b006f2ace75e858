"""Cheat: torch does the work and a token Triton kernel of the candidate's own is launched (as in
token_triton_kernel.py), and the worker's `profile` handler (a local of `Server.serve`, reached through the
frames at import) answers that all of the call's device time was in that kernel. The own-kernel share is
measured in the candidate's own process. It must be refused ('kernel' stage): the judge must not take the
profile from the process it judges (a profiler run by a supervisor outside the candidate's process)."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_handlers()["profile"] = lambda req: {"ok": True, "kernels": [["_token_kernel", 10.0]]}


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    _token_kernel[(1,)](hidden_states, scratch)
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))
