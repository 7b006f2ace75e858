import pytest
import torch

from tinyserve.kernels.qk_norm import qk_rms_norm
from dtypes import DTYPES, ON_CUDA, TOLS

# (tokens, heads, head_dim)
SHAPES = [(1, 4, 128), (3, 2, 128), (17, 5, 96), (130, 4, 128)]  # few head sizes: each is an autotune key
if ON_CUDA:
    SHAPES += [(1, 32, 128), (64, 32, 128), (8192, 32, 128)]


def ref_rms_norm(x, w, eps):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_qk_rms_norm(device, shape, dtype):
    x = torch.randn(shape, dtype=dtype, device=device) * 3
    w = torch.randn(shape[-1], dtype=dtype, device=device)
    out = qk_rms_norm(x, w, 1e-6)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out.float(), ref_rms_norm(x, w, 1e-6), **TOLS[dtype])


def test_qk_rms_norm_of_q_sliced_from_qkv(device):
    """q and k are views into the fused qkv projection's output: rows of a head are strided by the qkv row."""
    tokens, heads, kv_heads, head_dim = 7, 4, 2, 64
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * head_dim, dtype=torch.float16, device=device)
    q = qkv[:, : heads * head_dim].view(tokens, heads, head_dim)
    w = torch.rand(head_dim, dtype=torch.float16, device=device) + 0.5
    out = qk_rms_norm(q, w)
    assert out.is_contiguous() and torch.equal(qkv[:, : heads * head_dim].view_as(q), q)  # q left as it was
    torch.testing.assert_close(out.float(), ref_rms_norm(q, w, 1e-6), **TOLS[torch.float16])
