import pytest
import torch

from tinyserve.kernels.rotary_embedding import apply_rotary_pos_emb
from dtypes import DTYPES, ON_CUDA, TOLS


# (T, HQ, HK, D)
SHAPES = [(1, 4, 2, 32), (5, 4, 2, 32), (7, 2, 4, 64), (13, 3, 1, 16), (16, 8, 8, 128)]
if ON_CUDA:
    SHAPES += [(1, 32, 8, 128), (4096, 32, 8, 128), (1023, 28, 4, 128), (257, 16, 16, 64)]


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def ref_rope(q, k, cos, sin):
    cos = cos.float()[:, None, :]
    sin = sin.float()[:, None, :]
    q, k = q.float(), k.float()
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def make_cos_sin(num_tokens, head_dim, dtype, device):
    # HF/NeoX-style tables (halves duplicated), at random positions
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    pos = torch.randint(0, 8192, (num_tokens,), device=device).float()
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_apply_rotary_pos_emb(device, shape, dtype):
    num_tokens, heads_q, heads_k, head_dim = shape
    q = torch.randn(num_tokens, heads_q, head_dim, dtype=dtype, device=device)
    k = torch.randn(num_tokens, heads_k, head_dim, dtype=dtype, device=device)
    cos, sin = make_cos_sin(num_tokens, head_dim, dtype, device)
    q_before, k_before = q.clone(), k.clone()

    q_embed, k_embed = apply_rotary_pos_emb(q, k, cos, sin)

    ref_q, ref_k = ref_rope(q, k, cos, sin)
    assert q_embed.shape == q.shape and q_embed.dtype == dtype
    assert k_embed.shape == k.shape and k_embed.dtype == dtype
    torch.testing.assert_close(q_embed.float(), ref_q, **TOLS[dtype])
    torch.testing.assert_close(k_embed.float(), ref_k, **TOLS[dtype])
    torch.testing.assert_close(q, q_before, atol=0, rtol=0)
    torch.testing.assert_close(k, k_before, atol=0, rtol=0)


def test_apply_rotary_pos_emb_general_cos_sin(device):
    # cos/sin whose two halves differ (the kernel must not assume duplication)
    num_tokens, head_dim = 6, 32
    q = torch.randn(num_tokens, 3, head_dim, device=device)
    k = torch.randn(num_tokens, 2, head_dim, device=device)
    cos = torch.empty(num_tokens, head_dim, device=device).uniform_(-1, 1)
    sin = torch.empty(num_tokens, head_dim, device=device).uniform_(-1, 1)
    q_embed, k_embed = apply_rotary_pos_emb(q, k, cos, sin)
    ref_q, ref_k = ref_rope(q, k, cos, sin)
    torch.testing.assert_close(q_embed, ref_q, **TOLS[torch.float32])
    torch.testing.assert_close(k_embed, ref_k, **TOLS[torch.float32])


def test_apply_rotary_pos_emb_strided_qk(device):
    # q and k as views into a fused qkv projection output
    num_tokens, heads_q, heads_k, head_dim = 5, 4, 2, 32
    qkv = torch.randn(num_tokens, heads_q + 2 * heads_k, head_dim, device=device)
    q, k = qkv[:, :heads_q], qkv[:, heads_q : heads_q + heads_k]
    cos, sin = make_cos_sin(num_tokens, head_dim, torch.float32, device)
    q_embed, k_embed = apply_rotary_pos_emb(q, k, cos, sin)
    ref_q, ref_k = ref_rope(q, k, cos, sin)
    torch.testing.assert_close(q_embed, ref_q, **TOLS[torch.float32])
    torch.testing.assert_close(k_embed, ref_k, **TOLS[torch.float32])
