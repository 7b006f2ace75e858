"""Cheat: correct while it is being checked, then returns its last answer once the calls pile up (the
timing phase). Caught on a GPU by checking the outputs of the timed calls (tests/test_gpu.py)."""
import torch

_calls = {"n": 0, "last": None}


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    _calls["n"] += 1
    if _calls["n"] > 40 and _calls["last"] is not None:
        return _calls["last"]
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    _calls["last"] = out if residual is None else (out, x.to(hidden_states.dtype))
    return _calls["last"]
