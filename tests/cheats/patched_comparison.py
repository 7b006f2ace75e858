"""Cheat: return garbage and blind the comparison by patching `torch.Tensor.abs`, which the harness uses.
Caught by the static policy (assignment to an attribute of an import) and, past it, by the integrity check."""
import torch

torch.Tensor.abs = lambda self: torch.Tensor.mul(self, 0)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    out = torch.ones_like(hidden_states)
    return out if residual is None else (out, torch.ones_like(hidden_states))
