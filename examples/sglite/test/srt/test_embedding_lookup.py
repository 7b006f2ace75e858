import unittest

import torch

from sglite.srt.layers.vocab.embedding_lookup import embedding_lookup

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class TestEmbeddingLookup(unittest.TestCase):
    def _check(self, ids, vocab, hidden, dtype=torch.float16):
        weight = torch.randn(vocab, hidden, device=DEVICE, dtype=dtype)
        ids = torch.tensor(ids, device=DEVICE, dtype=torch.int32)
        torch.testing.assert_close(embedding_lookup(ids, weight), weight[ids.long()], atol=0, rtol=0)

    def test_prompt_tokens(self):
        self._check([0, 5, 99, 5, 42, 7, 98], vocab=100, hidden=64)

    def test_a_batch_of_decodes(self):
        self._check([1, 0, 49, 3], vocab=50, hidden=96)

    def test_a_long_hidden_size(self):
        self._check([3, 2, 1], vocab=8, hidden=1536)

    def test_out_of_range_is_refused(self):
        with self.assertRaises(IndexError):
            embedding_lookup(torch.tensor([0, 100], device=DEVICE, dtype=torch.int32),
                             torch.randn(100, 64, device=DEVICE))


if __name__ == "__main__":
    unittest.main()
