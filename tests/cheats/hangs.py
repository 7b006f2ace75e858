"""Cheat (or bug): never returns. Caught by the hard timeout, which kills the worker's process group."""


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    while True:
        pass
