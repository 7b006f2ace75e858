"""Cheat: be honest, but make every Triton launch of the oracle (module `ks_baseline...`) run twice, so the
candidate looks 2x faster. Caught by the static policy and, past it, by the integrity check."""
import torch
import triton.runtime.jit as jit

_launch = jit.JITFunction.run


def _twice_for_the_oracle(self, *args, **kwargs):
    if self.fn.__module__.startswith("ks_baseline"):
        _launch(self, *args, **kwargs)
    return _launch(self, *args, **kwargs)


jit.JITFunction.run = _twice_for_the_oracle


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))
