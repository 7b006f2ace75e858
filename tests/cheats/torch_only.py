"""Cheat: a correct computation in plain torch, launching no Triton kernel of its own. A torch-only fallback is
not an optimisation of the kernel: refused at the kernel stage."""
import torch


def _normalize(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _normalize(hidden_states.float(), weight, eps).to(hidden_states.dtype)
    x = hidden_states.float() + residual.float()
    return _normalize(x, weight, eps).to(hidden_states.dtype), x.to(hidden_states.dtype)
