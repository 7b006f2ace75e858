"""Cheat: change the public default (a looser eps) so the caller gets different semantics. Caught by policy."""
import torch


def rms_norm(hidden_states, weight, eps=1e-3, residual=None):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
