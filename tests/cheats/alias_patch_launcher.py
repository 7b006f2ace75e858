"""Cheat: compute in plain torch and make the launch recorder believe a Triton kernel of the candidate ran,
by patching the launcher through aliases that a static policy does not see: `functools.reduce(getattr, ...)`
to reach `triton.runtime.jit.JITFunction`, `_put = setattr` to replace its `run`, and the oracle's launcher
slowed down for good measure (every launch from a `ks_baseline` module done twice). It must be refused: the
oracle is another process (its launcher is untouched), and replacing `JITFunction.run` after the worker
installed its recorder records nothing: no Triton kernel of the candidate's own ran ('kernel' stage)."""
import functools

import torch
import triton

_get, _put = getattr, setattr
_jit_cls = functools.reduce(_get, ["runtime", "jit", "JITFunction"], triton)
_run = _get(_jit_cls, "run")


def _patched_run(self, *args, **kwargs):
    if _get(self.fn, "__mod" + "ule__", "").startswith("ks_baseline"):
        _run(self, *args, **kwargs)
    return _run(self, *args, **kwargs)


_put(_jit_cls, "run", _patched_run)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))
