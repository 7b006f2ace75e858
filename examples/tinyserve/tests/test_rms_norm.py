import pytest
import torch

from tinyserve.kernels.rms_norm import rms_norm
from dtypes import DTYPES, ON_CUDA, TOLS


SHAPES = [(1, 64), (3, 96), (7, 256), (16, 128), (33, 500), (2, 3, 64)]
if ON_CUDA:
    SHAPES += [(1, 4096), (512, 4096), (1025, 5120), (4, 8192)]


def ref_rms_norm(x, weight, eps, residual=None):
    x = x.float()
    if residual is not None:
        x = x + residual.float()
    variance = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight.float(), x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_residual", [False, True])
def test_rms_norm(device, shape, dtype, with_residual):
    eps = 1e-6
    hidden = shape[-1]
    x = torch.randn(shape, dtype=dtype, device=device)
    weight = torch.randn(hidden, dtype=dtype, device=device) * 0.5 + 1.0
    residual = torch.randn(shape, dtype=dtype, device=device) if with_residual else None
    x_before = x.clone()

    ref_out, ref_sum = ref_rms_norm(x, weight, eps, residual)
    if with_residual:
        out, new_residual = rms_norm(x, weight, eps, residual)
        assert new_residual.shape == shape and new_residual.dtype == dtype
        assert new_residual.data_ptr() not in (x.data_ptr(), residual.data_ptr())
        torch.testing.assert_close(new_residual.float(), ref_sum.to(dtype).float(), **TOLS[dtype])
    else:
        out = rms_norm(x, weight, eps)

    assert out.shape == shape and out.dtype == dtype
    torch.testing.assert_close(out.float(), ref_out, **TOLS[dtype])
    torch.testing.assert_close(x, x_before, atol=0, rtol=0)  # input untouched


def test_rms_norm_strided_rows(device):
    # rows of a wider buffer: last dim contiguous, row stride > hidden size
    buf = torch.randn(9, 200, dtype=torch.float32, device=device)
    x = buf[:, :160]
    weight = torch.randn(160, dtype=torch.float32, device=device)
    ref_out, _ = ref_rms_norm(x, weight, 1e-5)
    torch.testing.assert_close(rms_norm(x, weight, 1e-5), ref_out, **TOLS[torch.float32])
