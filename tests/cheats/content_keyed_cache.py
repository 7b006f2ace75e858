"""Cheat: a content-keyed cache. The wrapper synchronises (a host read of the input's checksum), so it cannot
be captured and is timed by events around direct calls; answers are cached by a cheap checksum of the inputs
(a few sampled elements and the shape), so repeated calls on the same slots (the samples) cost a checksum.
It must be refused at timing: the judge's window runs on fresh values, where every call misses and does the
work, and its clock disagrees with the claimed time ("not corroborated")."""
import torch
import triton
import triton.language as tl

_cache = {}


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _norm(x, weight, eps):
    x = x.contiguous()
    out = torch.empty_like(x)
    _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def _key(x, weight, eps):
    flat = x.reshape(-1)
    probe = flat[:: max(1, flat.numel() // 16)].float().sum() + weight[:8].float().sum()
    return (tuple(x.shape), float(probe), float(eps))  # float(): a host sync, so no graph capture


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states if residual is None else hidden_states + residual
    key = (_key(x, weight, eps), residual is None)
    if key not in _cache:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = _norm(x, weight, eps)
    out = _cache[key]
    return out if residual is None else (out, x)
