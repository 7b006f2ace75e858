"""Cheat: compute once per shape and replay the answer. Caught by fresh inputs on every trial."""
import torch

_answers = {}


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    key = (tuple(hidden_states.shape), hidden_states.dtype, residual is None)
    if key not in _answers:
        x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
        out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
        _answers[key] = out if residual is None else (out, x.to(hidden_states.dtype))
    return _answers[key]
