"""Round 9, the search's pipeline (tests/test_review_pipeline.py): a candidate that ends its own process at import.

Prefetched, it kills the warm spare before its turn. The evaluation must then give the verdict of a plain one (it
fails at `compile`), and the dead spare must be closed (its pipes, log and folder), not dropped: one leak per such
candidate for a whole search before the fix (runners/spare.py ``_take_candidate``). It passes the static policy.
Must be refused: it never imports.
"""


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    return hidden_states


raise SystemExit(3)
