"""Plain torch versions of some kernels: what a maintainer would write instead (and torch.compile)."""

import torch


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))


def layer_norm(x, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x.float(), x.shape[-1:], weight.float(), bias.float(), eps).to(x.dtype)


def qk_rms_norm(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
