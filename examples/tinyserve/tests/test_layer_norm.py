import pytest
import torch

from tinyserve.kernels.layer_norm import layer_norm
from dtypes import DTYPES, ON_CUDA, TOLS

# (M, N)
SHAPES = [(1, 64), (5, 96), (33, 256), (7, 1000)]
if ON_CUDA:
    SHAPES += [(1, 4096), (512, 4096), (8192, 4096)]


def ref_layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x.float(), x.shape[-1:], w.float(), b.float(), eps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm(device, shape, dtype):
    x = torch.randn(shape, dtype=dtype, device=device) * 3 + 1
    w = torch.randn(shape[-1], dtype=dtype, device=device)
    b = torch.randn(shape[-1], dtype=dtype, device=device)
    out = layer_norm(x, w, b, 1e-5)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out.float(), ref_layer_norm(x, w, b, 1e-5), **TOLS[dtype])
