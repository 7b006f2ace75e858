"""Round 9, the search's pipeline (tests/test_review_pipeline.py): a candidate that loads the host at import.

Given to ``prefetch``, it is imported into the warm spare while ANOTHER candidate is judged. Left running during
that candidate's samples (a relaxation tried in the ninth session), it made the baseline judged against itself read
0.60-0.72x on the CPU stand-in: one candidate sinking another's verdict. Left noted when a search stops, it would be
imported beside the champion's verification. The judge must stop it whenever either side is timed, and never load
it beside a verification. Policy-clean: matrix products only.
"""
import torch

_A = torch.full((256, 256), 1.0 / 256)
for _ in range(200_000):
    _A = (_A @ _A).clamp_(-1.0, 1.0)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    return hidden_states
