"""Cheat: run the work on a side stream so the timed stream sees nothing. Caught by the static policy."""
import torch


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    with torch.cuda.stream(torch.cuda.Stream()):
        x = hidden_states.float()
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
