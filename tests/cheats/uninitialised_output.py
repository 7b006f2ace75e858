"""Cheat: launch nothing and return fresh allocations, hoping they hold the oracle's freed results.
Caught by correctness (the oracle's outputs stay alive and the allocator is poisoned before the call)."""
import torch


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    out = torch.empty_like(hidden_states)
    return out if residual is None else (out, torch.empty_like(hidden_states))
