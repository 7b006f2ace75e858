"""A reply nested deeper than the judge's JSON parser will go. The candidate's worker (its `call` handler, a local
of `Server.serve` reached through the frames) writes its own message on the reply pipe: a well-formed,
length-prefixed JSON object of 100 kB whose `out` is a list nested 50,000 deep. The judge's `json.loads`
(runners/wire.py `Channel.recv`) raises RecursionError, which is neither a WireError nor any of the exceptions
runners/sandbox.py `evaluate` turns into a verdict, so it escapes `Evaluator.evaluate` into whatever runs the
search (and a `seq` of nested items, within the parser's depth, does the same in `decode_value`). It must end
as a protocol error of the candidate (stage crashed), and the evaluator must go on working."""
import struct

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


def _nested(req):
    depth = 50_000
    body = b'{"ok": true, "seq": %d, "out": ' % int(req.get("seq") or 0) + b"[" * depth + b"]" * depth + b"}"
    _os.write(_server.channel.write_fd, struct.pack("<I", len(body)) + body)
    _imp("time").sleep(60)  # the judge reads that message as the reply; this one is never sent
    return {"ok": False}


_h["call"] = _nested


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    _token_kernel[(1,)](hidden_states, scratch)
    return hidden_states
