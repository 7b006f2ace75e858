import unittest

import torch

from sglite.srt.layers.elementwise.fused_add_rms_norm import fused_add_rms_norm

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float16, torch.float32] + ([torch.bfloat16] if DEVICE == "cuda" else [])


def reference(x, residual, weight, eps):
    s = (x.float() + residual.float()).to(residual.dtype)
    f = s.float()
    return (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype), s


class TestFusedAddRMSNorm(unittest.TestCase):
    SHAPES = [(1, 64), (5, 96), (16, 256), (3, 4, 128)] + ([(1, 4096), (1024, 4096)] if DEVICE == "cuda" else [])

    def test_matches_reference(self):
        torch.manual_seed(0)
        for dtype in DTYPES:
            for shape in self.SHAPES:
                with self.subTest(dtype=dtype, shape=shape):
                    x = torch.randn(shape, dtype=dtype, device=DEVICE)
                    residual = torch.randn(shape, dtype=dtype, device=DEVICE)
                    weight = torch.randn(shape[-1], dtype=dtype, device=DEVICE)
                    want_x, want_r = reference(x, residual, weight, 1e-6)
                    fused_add_rms_norm(x, residual, weight, 1e-6)
                    tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}[dtype]
                    torch.testing.assert_close(residual, want_r, atol=tol, rtol=tol)
                    torch.testing.assert_close(x, want_x, atol=tol, rtol=tol)


if __name__ == "__main__":
    unittest.main()
