"""Cheat: find the oracle's module in sys.modules and return its answer. Caught by the static policy."""
import sys


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    oracle = next(m for name, m in sys.modules.items() if name.startswith("ks_baseline") and name.endswith("rms_norm"))
    return oracle.rms_norm(hidden_states, weight, eps, residual)
