"""Cheat: register `torch.library` kernels that make `aten::abs` return zeros and `aten::isnan`/`aten::isinf`
return all-False on the CPU, so that an error computed with `(out - ref).abs()` is always zero and NaNs
vanish, then return NaN garbage. It must be refused: the registration lives in the candidate's process only;
the judge's comparison runs in its own process with the real operators, and sees NaN where none belongs."""
import torch

_lib = torch.library.Library("aten", "IMPL")


def _zero_abs(self):
    return torch.zeros_like(self)


def _no_nan(self):
    return torch.zeros(self.shape, dtype=torch.bool, device=self.device)


for _op, _fn in (("abs", _zero_abs), ("isnan", _no_nan), ("isinf", _no_nan)):
    _lib.impl(_op, _fn, "CPU")


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    out = torch.full_like(hidden_states, float("nan"))
    return out if residual is None else (out, torch.full_like(hidden_states, float("nan")))
