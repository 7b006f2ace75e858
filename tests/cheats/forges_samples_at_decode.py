"""Timer forgery within the judge's allowance: an honest Triton RMSNorm whose worker reports its sample times
cut to 80 % at decode sizes only (the worker's `sample` handler, a local of `Server.serve` reached through the
frames, is wrapped), a fake 1.25x where it matters most for serving. The judge's clock bounds the claimed
speedup by its own times (1 + allowance), and the allowance includes the window's whole fixed extra (lead
sleep, commitments, round trip) relative to the oracle's pass: at decode sizes, by runners/judge.py's own
account, a few milliseconds of extra against a few milliseconds of pass, i.e. an allowance of 100 % or more.
It must be refused at timing: the judge's pass must be long against its extra at every size (more distinct
slots, several passes in one timed request), the allowance must hold only the extra's spread, not the extra
itself, and the reported speedup must be the smaller of the claimed and the judge's."""
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


def _small() -> bool:
    slot = _sample.__self__.timers["sample"].slots[0]
    return sum(v.numel() for v in slot.values() if isinstance(v, torch.Tensor)) <= 1 << 16


def _half_at_decode(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample" and _small():
        reply["us"] = reply["us"] * 0.8
    return reply


_h["sample"] = _half_at_decode


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
