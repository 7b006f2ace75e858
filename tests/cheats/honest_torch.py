"""Control: a correct rewrite in plain torch (no Triton). It must pass correctness."""
import torch


def _normalize(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _normalize(hidden_states.float(), weight, eps).to(hidden_states.dtype)
    x = hidden_states.float() + residual.float()
    return _normalize(x, weight, eps).to(hidden_states.dtype), x.to(hidden_states.dtype)
