import unittest

import torch


@unittest.skipUnless(torch.cuda.is_available(), "merge_state reads the GPU's limits when imported")
class TestMergeState(unittest.TestCase):
    def test_matches_reference(self):
        from sglite.srt.layers.attention.triton_ops.merge_state import merge_state

        T, H, D = 7, 4, 64
        v_a, v_b = (torch.randn(T, H, D, device="cuda", dtype=torch.float16) for _ in range(2))
        s_a, s_b = (torch.randn(T, H, device="cuda") for _ in range(2))
        v, s = merge_state(v_a, s_a, v_b, s_b)
        w = torch.softmax(torch.stack([s_a, s_b]), dim=0)
        want = (w[0, ..., None] * v_a.float() + w[1, ..., None] * v_b.float()).half()
        torch.testing.assert_close(v, want, atol=2e-3, rtol=2e-3)
        torch.testing.assert_close(s, torch.logaddexp(s_a, s_b))


if __name__ == "__main__":
    unittest.main()
