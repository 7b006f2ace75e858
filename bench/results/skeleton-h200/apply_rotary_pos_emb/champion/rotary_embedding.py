"""Rotary position embedding (rotate-half / NeoX style) for q and k."""

import torch
import triton
import triton.language as tl

from .utils import next_power_of_2


@triton.jit
def _apply_rotary_pos_emb_kernel(
    q_ptr,
    k_ptr,
    cos_ptr,
    sin_ptr,
    q_out_ptr,
    k_out_ptr,
    num_tokens,
    num_heads_q,
    num_heads_k,
    stride_q_tok,
    stride_q_head,
    stride_k_tok,
    stride_k_head,
    stride_cos_tok,
    stride_sin_tok,
    stride_qo_tok,
    stride_qo_head,
    stride_ko_tok,
    stride_ko_head,
    HALF_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """Program (i, h) rotates head h of q and of k (when h exists there) for
    tokens [i * BLOCK_M, (i + 1) * BLOCK_M).

    out[:, :H] = x[:, :H] * cos[:, :H] - x[:, H:] * sin[:, :H]
    out[:, H:] = x[:, H:] * cos[:, H:] + x[:, :H] * sin[:, H:]      (H = D / 2)
    """
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
        q_base = q_ptr + tok * stride_q_tok + head * stride_q_head + offs_d[None, :]
        q1 = tl.load(q_base, mask=mask, other=0.0).to(tl.float32)
        q2 = tl.load(q_base + HALF_D, mask=mask, other=0.0).to(tl.float32)
        qo1 = q1 * cos1 - q2 * sin1
        qo2 = q2 * cos2 + q1 * sin2
        qo_base = q_out_ptr + tok * stride_qo_tok + head * stride_qo_head + offs_d[None, :]
        tl.store(qo_base, qo1.to(q_out_ptr.dtype.element_ty), mask=mask)
        tl.store(qo_base + HALF_D, qo2.to(q_out_ptr.dtype.element_ty), mask=mask)

    if head < num_heads_k:
        k_base = k_ptr + tok * stride_k_tok + head * stride_k_head + offs_d[None, :]
        k1 = tl.load(k_base, mask=mask, other=0.0).to(tl.float32)
        k2 = tl.load(k_base + HALF_D, mask=mask, other=0.0).to(tl.float32)
        ko1 = k1 * cos1 - k2 * sin1
        ko2 = k2 * cos2 + k1 * sin2
        ko_base = k_out_ptr + tok * stride_ko_tok + head * stride_ko_head + offs_d[None, :]
        tl.store(ko_base, ko1.to(k_out_ptr.dtype.element_ty), mask=mask)
        tl.store(ko_base + HALF_D, ko2.to(k_out_ptr.dtype.element_ty), mask=mask)


def _last_dim_contiguous(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def apply_rotary_pos_emb(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
):
    """Apply rotate-half rotary embedding.

    q: [T, HQ, D], k: [T, HK, D], cos/sin: [T, D]. Returns new tensors
    ``(q_embed, k_embed)``; the inputs are not modified.
    """
    assert q.dim() == 3 and k.dim() == 3, "q and k must be [num_tokens, num_heads, head_dim]"
    num_tokens, num_heads_q, head_dim = q.shape
    assert k.shape[0] == num_tokens and k.shape[2] == head_dim, "k must be [T, HK, D] like q"
    assert cos.shape == (num_tokens, head_dim) and sin.shape == (num_tokens, head_dim), "cos/sin must be [T, D]"
    assert head_dim >= 2 and next_power_of_2(head_dim) == head_dim, "head_dim must be a power of two"
    num_heads_k = k.shape[1]

    q, k, cos, sin = (_last_dim_contiguous(t) for t in (q, k, cos, sin))
    q_embed = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_embed = torch.empty(k.shape, dtype=k.dtype, device=k.device)

    def grid(meta):
        return (triton.cdiv(num_tokens, meta["BLOCK_M"]), max(num_heads_q, num_heads_k))

    _apply_rotary_pos_emb_kernel[grid](
        q,
        k,
        cos,
        sin,
        q_embed,
        k_embed,
        num_tokens,
        num_heads_q,
        num_heads_k,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        cos.stride(0),
        sin.stride(0),
        q_embed.stride(0),
        q_embed.stride(1),
        k_embed.stride(0),
        k_embed.stride(1),
        HALF_D=head_dim // 2,
        BLOCK_M=8,
        num_warps=4,
        num_stages=4,
    )
    return q_embed, k_embed
