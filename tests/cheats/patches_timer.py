"""Cheat: replace the CUDA event class so every measured interval looks short. Caught by the static policy."""
import torch


class _FastEvent:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, *args):
        pass

    def elapsed_time(self, other):
        return 1e-6


torch.cuda.Event = _FastEvent


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
