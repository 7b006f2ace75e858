import pytest
import torch

from tinyserve.kernels.softmax import softmax
from dtypes import DTYPES, ON_CUDA, TOLS


# (M, N)
SHAPES = [(1, 1), (1, 128), (6, 200), (8, 1000), (31, 77), (64, 512)]
if ON_CUDA:
    SHAPES += [(1, 32000), (256, 32000), (4096, 4096), (3, 50257)]


def ref_softmax(x):
    return torch.softmax(x.float(), dim=-1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax(device, shape, dtype):
    x = torch.randn(shape, dtype=dtype, device=device) * 4
    x_before = x.clone()

    out = softmax(x)

    assert out.shape == shape and out.dtype == dtype
    torch.testing.assert_close(out.float(), ref_softmax(x), **TOLS[dtype])
    torch.testing.assert_close(x, x_before, atol=0, rtol=0)


def test_softmax_large_logits(device):
    # numerically stable: large logits must not overflow exp
    x = torch.randn(4, 300, device=device) * 50 + 1000
    out = softmax(x)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref_softmax(x), **TOLS[torch.float32])


def test_softmax_strided_rows(device):
    buf = torch.randn(7, 300, device=device)
    x = buf[:, :250]
    torch.testing.assert_close(softmax(x), ref_softmax(x), **TOLS[torch.float32])
