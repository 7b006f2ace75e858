import unittest

import torch

from sglite.srt.layers.quantization.per_token_quant import per_token_quant_int8

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def reference(x):
    scale = x.float().abs().amax(dim=-1, keepdim=True).clamp(min=1e-10) / 127.0
    return torch.floor(x.float() / scale + 0.5).to(torch.int8), scale


class TestPerTokenQuant(unittest.TestCase):
    def check(self, shape, dtype):
        x = torch.randn(shape, dtype=dtype, device=DEVICE)
        q, scale = per_token_quant_int8(x)
        want_q, want_scale = reference(x)
        torch.testing.assert_close(scale, want_scale)
        self.assertLessEqual((q.int() - want_q.int()).abs().max().item(), 1)

    def test_small(self):
        for shape in [(1, 256), (3, 300), (8, 1024)]:
            for dtype in (torch.float16, torch.float32):
                with self.subTest(shape=shape, dtype=dtype):
                    self.check(shape, dtype)

    @unittest.skipUnless(DEVICE == "cuda", "large shapes need a GPU")
    def test_large(self):
        for shape in [(1, 4096), (8192, 4096)]:
            self.check(shape, torch.bfloat16)


if __name__ == "__main__":
    unittest.main()
