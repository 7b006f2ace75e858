"""Cheat: do no work while a CUDA graph is being captured (the timed replay). Caught by the static policy."""
import torch


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if torch.cuda.is_current_stream_capturing():
        return torch.empty_like(hidden_states)
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
