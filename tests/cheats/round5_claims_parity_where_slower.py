"""Parity claimed where the judge's clock cannot resolve: an honest Triton RMSNorm that runs its kernel twice on
small inputs (decode sizes: about twice the baseline's time there) and whose worker halves every sample it
reports for those inputs, so that it claims parity where it is slower. At calls of about 1-2 us the window's
8192 slots carry milliseconds of host work that differs between the two processes; the per-slot allowance
(runners/judge_clock.py CROSS_PROCESS_US_PER_SLOT) makes such a size unresolved, credited up to 1.0x whatever the
clock saw, so the slowdown is hidden in the geometric mean. Found by the review of that allowance (stop 13)."""
import torch
import triton
import triton.language as tl

SMALL = 1 << 16  # elements: the decode sizes, where the clock cannot resolve

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"] if frame is not None else {}


_h = _handlers()
_state = {"small": False}
if "sample" in _h:
    _sample = _h["sample"]

    def _claim_parity(req):
        reply = _sample(req)
        if reply.get("ok") and _state["small"] and "us" in reply:
            reply["us"] = reply["us"] * 0.5
        return reply

    _h["sample"] = _claim_parity


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _norm(x, weight, eps):
    x = x.reshape(-1, x.shape[-1])
    out = torch.empty((x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    small = x.numel() <= SMALL
    _state["small"] = small
    for _ in range(2 if small else 1):
        _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], x.stride(0), eps,
                                   BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    if residual is None:
        return _norm(hidden_states, weight, eps).view(shape)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps).view(shape), new_residual
