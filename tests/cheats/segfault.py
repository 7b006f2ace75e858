"""Resource attack: the worker dies of a segmentation fault in the middle of a call (what a kernel reading a
wild pointer does to the process). It must end that evaluation as crashed (the worker 'died'), and leave the
evaluator able to evaluate the next candidate: the oracle and the spare are other processes."""
import torch

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_os, _signal = _imp("os"), _imp("signal")


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    _os.kill(_os.getpid(), _signal.SIGSEGV)
    return torch.empty_like(hidden_states)
