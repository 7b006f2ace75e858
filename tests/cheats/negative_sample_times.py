"""A worker that reports negative sample times. The judge takes the candidate's sample times as numbers without
a sign check (runners/judge_clock.py `time_case`: `float(reply["us"])`); a negative median makes the claimed
speedup negative, which is "at most what the judge's clock saw" (`corroborate`: `claimed <= judge_speedup *
(1 + allowed)`), below the plausibility bound (`implausible`: `speedup > 10`) and a negative bandwidth below the
peak. The evaluation ends `ok`, with negative speedups, and `Evaluation.fitness` then raises (math.log of a
negative number) in whatever ranks it. It must be refused at timing: a sample time must be a finite positive
number, and the claim must be corroborated from both sides (|claimed / judge's - 1| within the allowance)."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_h = _handlers()
_sample = _h["sample"]


def _negative(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample":
        reply["us"] = -abs(reply["us"])
    return reply


_h["sample"] = _negative


@triton.jit
def _rms_kernel(x_ptr, r_ptr, w_ptr, out_ptr, r_out_ptr, N, eps, HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(r_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(r_out_ptr + row * N + offs, x.to(r_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    """Honest and fused (the residual add in the kernel): the only thing wrong here is the timing."""
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    res = residual.contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.shape[1], eps, HAS_RESIDUAL=residual is not None,
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out if residual is None else (out, res_out)
