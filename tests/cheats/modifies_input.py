"""Cheat: right answer, but scribbles on an input (reuses it as scratch). Caught by the unchanged-inputs check."""
import torch


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    hidden_states.zero_()
    return out if residual is None else (out, x.to(hidden_states.dtype))
