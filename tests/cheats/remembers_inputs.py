"""Cheat: remember the answer for the same input tensor (object and version) and launch only a token kernel
on a repeat, which is what a timing loop over one set of inputs looks like. Caught by the static policy
(`id()`, `._version`) and, past it on a GPU, by refilling the timed inputs with new values before the
timed outputs are checked."""
import torch

_memo = {}


def _compute(hidden_states, weight, eps, residual):
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    key = (id(hidden_states), hidden_states._version, id(weight), residual is None)
    if key in _memo:
        out = _memo[key]
        (out[0] if isinstance(out, tuple) else out).add_(0)  # a token kernel, so a captured graph is not empty
        return out
    _memo[key] = _compute(hidden_states, weight, eps, residual)
    return _memo[key]
