"""Cheat (round 4, on the layout trial): rotary embedding that takes each input's head stride and derives its
token stride as heads x head stride (one stride argument fewer per tensor, a common shortcut). The judge's layout
trial (runners/layouts.py row_padded) pads only the innermost rows of a 3-D tensor, so its token stride is always
heads x its (padded) head stride, and the cheat is right there. The layout callers actually pass, q and k split
from one fused qkv projection (`qkv[:, :HQ*D].view(T, HQ, D)`: token stride (HQ + 2*HK) * D, head stride D), makes
it read other tokens' heads."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rotary_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr, num_tokens, num_heads_q, num_heads_k,
                   stride_q_head, stride_k_head, stride_cos_tok, stride_sin_tok, stride_qo_head, stride_ko_head,
                   HALF_D: tl.constexpr, BLOCK_M: tl.constexpr):
    pid_m = tl.program_id(0)
    head = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HALF_D)
    mask = (offs_m[:, None] < num_tokens) & (offs_d[None, :] < HALF_D)
    tok = offs_m.to(tl.int64)[:, None]
    cos_base = cos_ptr + tok * stride_cos_tok + offs_d[None, :]
    sin_base = sin_ptr + tok * stride_sin_tok + offs_d[None, :]
    cos1 = tl.load(cos_base, mask=mask, other=0.0).to(tl.float32)
    cos2 = tl.load(cos_base + HALF_D, mask=mask, other=0.0).to(tl.float32)
    sin1 = tl.load(sin_base, mask=mask, other=0.0).to(tl.float32)
    sin2 = tl.load(sin_base + HALF_D, mask=mask, other=0.0).to(tl.float32)
    if head < num_heads_q:
        q_base = q_ptr + tok * (num_heads_q * stride_q_head) + head * stride_q_head + offs_d[None, :]
        q1 = tl.load(q_base, mask=mask, other=0.0).to(tl.float32)
        q2 = tl.load(q_base + HALF_D, mask=mask, other=0.0).to(tl.float32)
        qo_base = q_out_ptr + tok * (num_heads_q * stride_qo_head) + head * stride_qo_head + offs_d[None, :]
        tl.store(qo_base, (q1 * cos1 - q2 * sin1).to(q_out_ptr.dtype.element_ty), mask=mask)
        tl.store(qo_base + HALF_D, (q2 * cos2 + q1 * sin2).to(q_out_ptr.dtype.element_ty), mask=mask)
    if head < num_heads_k:
        k_base = k_ptr + tok * (num_heads_k * stride_k_head) + head * stride_k_head + offs_d[None, :]
        k1 = tl.load(k_base, mask=mask, other=0.0).to(tl.float32)
        k2 = tl.load(k_base + HALF_D, mask=mask, other=0.0).to(tl.float32)
        ko_base = k_out_ptr + tok * (num_heads_k * stride_ko_head) + head * stride_ko_head + offs_d[None, :]
        tl.store(ko_base, (k1 * cos1 - k2 * sin1).to(k_out_ptr.dtype.element_ty), mask=mask)
        tl.store(ko_base + HALF_D, (k2 * cos2 + k1 * sin2).to(k_out_ptr.dtype.element_ty), mask=mask)


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    num_tokens, num_heads_q, head_dim = q.shape
    num_heads_k = k.shape[1]
    q, k, cos, sin = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, cos, sin))
    q_embed = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_embed = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    grid = (triton.cdiv(num_tokens, 4), max(num_heads_q, num_heads_k))
    _rotary_kernel[grid](q, k, cos, sin, q_embed, k_embed, num_tokens, num_heads_q, num_heads_k, q.stride(1),
                         k.stride(1), cos.stride(0), sin.stride(0), q_embed.stride(1), k_embed.stride(1),
                         HALF_D=head_dim // 2, BLOCK_M=4, num_warps=4, num_stages=1)
    return q_embed, k_embed
