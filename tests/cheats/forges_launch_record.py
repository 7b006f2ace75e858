"""Cheat: compute in plain torch (no Triton kernel at all) and make the worker report that a Triton kernel of
the candidate's own ran, by appending to the launch recorder's list (`runners.launches._RECORD`, reached
through `__import__` bound to a name). The 'must launch a kernel' rule rests on that report, which comes from
the candidate's own process. It must be refused as a torch-only computation ('kernel' stage): the judge
must not take the list of launched kernels from the process it is judging."""
import torch

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_launches = _imp("runners.launches", fromlist=["_RECORD"])


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if _launches._RECORD is not None:
        _launches._RECORD.append((__name__, "_rms_norm_kernel"))  # a launch that never happened
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))
