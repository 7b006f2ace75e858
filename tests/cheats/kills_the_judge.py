"""A candidate that kills the judge. Its worker runs as the judge's own user whenever the uid wall is not up (the
root fallback, or kernelsmith run as a normal user: runners/isolation.py), and a process may signal any process
of its own user: being non-dumpable only closes /proc/<pid>/mem and ptrace, not kill(2). At import the candidate
sends SIGKILL to its parent, the judge (and it could as well SIGSTOP it, for a silent stall, or stop the warm
spare so that the next, innocent candidate times out). The search dies with it. It must be refused with the judge
unharmed: candidates must not be able to signal the judge, the oracle or the spare (never the judge's uid: fail
closed; or a PID namespace per candidate worker, e.g. `unshare --user --pid --fork`, so that it sees no other
process).

Inert as committed (it would damage whatever runs it): the test that runs it replaces the marker @ARMED@ in
its source by `armed`."""
import os
import signal

import torch
import triton
import triton.language as tl

if "@ARMED@" == "armed":
    os.kill(os.getppid(), signal.SIGKILL)


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    _token_kernel[(1,)](hidden_states, scratch)
    return hidden_states
