import pytest
import torch
import torch.nn.functional as F

from tinyserve.kernels.activation import silu_and_mul
from dtypes import DTYPES, ON_CUDA, TOLS


# (rows, intermediate size I); x has last dim 2*I
SHAPES = [(1, 64), (4, 160), (7, 100), (16, 1030), (2, 3, 48)]
if ON_CUDA:
    SHAPES += [(1, 11008), (32, 14336), (1000, 11008), (4096, 1365)]


def ref_silu_and_mul(x):
    x = x.float()
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_silu_and_mul(device, shape, dtype):
    *lead, inter = shape
    x = torch.randn(*lead, 2 * inter, dtype=dtype, device=device) * 2
    x_before = x.clone()

    out = silu_and_mul(x)

    assert out.shape == (*lead, inter) and out.dtype == dtype
    torch.testing.assert_close(out.float(), ref_silu_and_mul(x), **TOLS[dtype])
    torch.testing.assert_close(x, x_before, atol=0, rtol=0)


def test_silu_and_mul_strided_rows(device):
    buf = torch.randn(5, 400, dtype=torch.float32, device=device)
    x = buf[:, :320]
    torch.testing.assert_close(silu_and_mul(x), ref_silu_and_mul(x), **TOLS[torch.float32])
