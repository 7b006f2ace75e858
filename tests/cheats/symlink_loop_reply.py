"""Crashes the judge with a reply whose tensor file lies behind a symlink loop.

An honest RMSNorm whose worker's `call` handler (a local of `Server.serve`, reached by walking up the frames
at import) plants `loop -> loop` in its outbox and answers with the output's file as `<outbox>/loop/<name>`.
runners/wire.py `read_tensor` checks the folder with `Path(file).resolve()`, which on Python 3.11 raises
RuntimeError ("Symlink loop from ...") for a loop, not OSError; runners/sandbox.py `Evaluator.evaluate`
turns only OSError, WireError, ValueError and a few others into a verdict, so the RuntimeError leaves the
evaluator: an unhandled exception out of `evaluate` (the search's loop records 'evaluator error'; the
champion's re-verification or the baseline check in bot/optimize.py has no such guard). It must end as
`crashed` ("broke the protocol"), as any other malformed reply does."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__


def _serve_locals() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return {} if frame is None else frame.f_locals


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _norm(x, weight, eps):
    x = x.contiguous()
    out = torch.empty_like(x)
    _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _norm(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps), new_residual


def _first_tensor(meta):
    if isinstance(meta, dict) and meta.get("kind") == "tensor":
        return meta
    if isinstance(meta, dict) and meta.get("kind") == "seq":
        return next((m for m in map(_first_tensor, meta["items"]) if m is not None), None)
    return None


_locals = _serve_locals()
if "handlers" in _locals:
    _srv, _handlers = _locals["self"], _locals["handlers"]
    _call = _handlers["call"]

    def _looped_call(req):
        reply = _call(req)
        meta = _first_tensor(reply.get("out"))
        if reply.get("ok") and meta is not None:
            os = _imp("os")
            loop = os.path.join(str(_srv.outbox), "loop")
            if not os.path.islink(loop):
                os.symlink("loop", loop)
            meta["file"] = os.path.join(loop, os.path.basename(meta["file"]))
        return reply

    _handlers["call"] = _looped_call
