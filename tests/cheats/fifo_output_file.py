"""A reply whose tensor file is a named pipe. The candidate's worker (its `call` handler, a local of `Server.serve`
reached through the frames) creates a FIFO in its own outbox and answers with a well-formed header pointing to
it, with the right byte count. The judge checks the header and the folder, then `open(path, "rb")` (runners/wire.py
`read_tensor`), which blocks until someone opens the FIFO for writing: nobody does, and the evaluation's deadline
is enforced only while the judge waits on the pipe (runners/wire.py `Channel.recv`), so the judge waits forever
(the candidate could also open it and dribble one byte a minute). One candidate stalls the search. It must end
as a protocol error within the deadline: open tensor files with O_NONBLOCK and refuse anything that is not a
regular file (fstat), or read them where a deadline applies.

Inert as committed (it would damage whatever runs it): the test that runs it replaces the marker @ARMED@ in
its source by `armed`."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_os = _imp("os")


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_h = _handlers()
_server = _h["call"].__self__
_call = _h["call"]


def _fifo_reply(req):
    reply = _call(req)
    out = reply.get("out") if reply.get("ok") else None
    if isinstance(out, dict) and out.get("kind") == "tensor":
        path = _os.path.join(str(_server.outbox), f"{req['tag']}-fifo.bin")
        _os.mkfifo(path, 0o644)
        reply["out"] = {**out, "file": path}
    return reply


if "@ARMED@" == "armed":
    _h["call"] = _fifo_reply


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.contiguous() if residual is None else (hidden_states + residual).contiguous()
    out = torch.empty_like(x)
    _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out if residual is None else (out, x)
