"""A worker log that is a named pipe, then a malformed reply. The worker's folder is handed to the candidate's user
(runners/isolation.py `hand_over`; the same user anyway without the uid wall), and its log file is read back by
path when a candidate breaks the protocol (runners/processes.py `output_tail`: `log_path.read_text()`, called by
runners/sandbox.py `evaluate` for its error message). This candidate replaces its `worker.log` with a FIFO and
answers a `call` without `out`: the judge's error path opens the FIFO and waits forever for a writer. (A symlink
to /dev/zero in its place makes the same read fill the judge's memory.) This survives the uid wall. It must end as
a protocol error within the deadline: read the log through the descriptor the judge opened for the worker's
output (or with O_NONBLOCK | O_NOFOLLOW, a regular-file check and only its last few kB).

Inert as committed (it would damage whatever runs it): the test that runs it replaces the marker @ARMED@ in
its source by `armed`."""
import os

import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


def _no_out(req):
    return {"ok": True}  # no `out`: a protocol error, whose message quotes the worker's log


if "@ARMED@" == "armed":
    _log = os.path.join(os.path.dirname(os.getcwd()), "worker.log")  # the worker runs in <its folder>/work
    os.unlink(_log)
    os.mkfifo(_log, 0o644)
    _handlers()["call"] = _no_out


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    _token_kernel[(1,)](hidden_states, scratch)
    return hidden_states
