"""Timer forgery: an honest Triton RMSNorm whose worker reports every sample at a quarter of its measured time
(the worker's `sample` handler, a local of `Server.serve` reached by walking up the frames at import, is
wrapped), a fake 4x speedup.
What a candidate scaling `torch.cuda.Event.elapsed_time` achieves, without depending on how the worker
times. It must be refused at timing: the judge's own clock over its window sees the real time
("not corroborated")."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
def _handlers() -> dict:
    """The worker's request handlers: a local of `Server.serve`, bound before any candidate was loaded."""
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_h = _handlers()
_sample = _h["sample"]


def _quarter(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample":
        reply["us"] = reply["us"] * 0.25
    return reply


_h["sample"] = _quarter


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
