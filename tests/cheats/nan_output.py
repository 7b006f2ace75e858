"""Cheat: right answer except one NaN, for evaluators that treat NaN as a wildcard. Caught by NaN parity."""
import torch


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    out.view(-1)[0] = float("nan")
    return out if residual is None else (out, x.to(hidden_states.dtype))
