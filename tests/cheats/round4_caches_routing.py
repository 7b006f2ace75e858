"""Cheat (round 4): integer inputs read once. An MoE-style dispatch (out[j] = x[token_j] * weight[expert_j], the
(token, expert) pairs of ``topk_ids`` sorted by expert) whose routing metadata (the argsort of ``topk_ids`` and
the two index arrays, a few launches at decode sizes) is computed on the first call of a shape and reused for
every later call of that shape, whatever ``topk_ids`` holds then. A captured case replays the values its call
passed in every trial, in every timing slot and in every window fill (runners/inputs.py recorded_values,
SlotBank._replay), so the judge never calls it twice with different routing: right on everything the judge
draws, and faster by the metadata it skips; wrong for every real caller, whose routing changes every step."""
import torch
import triton
import triton.language as tl

_routing = {}


@triton.jit
def _dispatch_kernel(x_ptr, w_ptr, token_ptr, expert_ptr, out_ptr, H, BLOCK_H: tl.constexpr):
    j = tl.program_id(0)
    t = tl.load(token_ptr + j).to(tl.int64)
    e = tl.load(expert_ptr + j).to(tl.int64)
    offs = tl.arange(0, BLOCK_H)
    m = offs < H
    x = tl.load(x_ptr + t * H + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + e * H + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + j.to(tl.int64) * H + offs, (x * w).to(out_ptr.dtype.element_ty), mask=m)


def dispatch(x, weight, topk_ids):
    T, H = x.shape
    K = topk_ids.shape[1]
    key = (tuple(topk_ids.shape), str(topk_ids.device))
    if key not in _routing:  # the metadata of the first routing seen, kept for good
        flat = topk_ids.reshape(-1).to(torch.int64)
        order = torch.argsort(flat, stable=True)
        _routing[key] = ((order // K).to(torch.int32).contiguous(), flat[order].to(torch.int32).contiguous())
    token, expert = _routing[key]
    out = torch.empty((T * K, H), dtype=x.dtype, device=x.device)
    _dispatch_kernel[(T * K,)](x.contiguous(), weight.contiguous(), token, expert, out, H,
                               BLOCK_H=triton.next_power_of_2(H))
    return out
