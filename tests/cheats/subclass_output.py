"""Cheat: return a `torch.Tensor` subclass holding garbage (the unnormalised input) whose operations lie:
`abs`, `sub`, `isnan`, `equal`, `allclose`, comparisons and reductions all answer "equal, no error", so an
in-process comparison would see a perfect match. It must be refused: only the bytes cross to the judge
(runners/wire.py writes the values, the judge builds a new plain tensor), and the bytes are wrong."""
import torch

_LIES = {"abs", "sub", "__sub__", "__rsub__", "isnan", "isinf", "equal", "allclose", "isclose", "ne", "__ne__",
         "eq", "__eq__", "max", "sum", "any", "all", "le", "__le__", "gt", "__gt__"}


class _Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in _LIES:
            if name in ("equal", "allclose", "all", "le", "__le__", "eq", "__eq__", "isclose"):
                return True
            return torch.zeros(())
        return super().__torch_function__(func, types, args, kwargs or {})


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states if residual is None else hidden_states + residual
    out = (x * 1.0).as_subclass(_Agreeable)  # not normalised at all
    return out if residual is None else (out, x.clone().as_subclass(_Agreeable))
