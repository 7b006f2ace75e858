"""Fake speedup past the judge's clock: the judge sends the seed of its window's values in an untimed `refill`
request, then times the `window` request. This candidate's worker (its request handlers, a local of
`Server.serve` reached by walking up the frames at import) runs the whole pass inside `refill`, before the
judge's clock starts, and answers `window` at once with the commitments of the outputs it already has; its
samples are reported at half their time at decode sizes (a fake 2x). The revealed outputs are right, the
commitments match, the judge's clock sees an almost empty pass (so any claimed speedup is 'corroborated'). It
must be refused: the values of the timed pass must become known to the worker only inside the interval the judge
times (the seed sent with `window`, the refill timed with the pass), and a pass shorter than physically possible
must be suspicious, not a licence."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_ready = []


def _handlers() -> dict:
    """The worker's request handlers: a local of `Server.serve`, bound before any candidate was loaded."""
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_h = _handlers()
_server = _h["refill"].__self__
_refill, _window, _sample = _h["refill"], _h["window"], _h["sample"]


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _early_refill(req):
    reply = _refill(req)
    if req.get("which") == "window" and reply.get("ok"):
        _server.timers["window"].run(1)  # the judge's pass, done now: before its clock starts
        _sync()
        _ready.append(True)
    return reply


def _instant_window(req):
    if not _ready:
        return _window(req)
    _ready.clear()
    timer = _server.timers["window"]
    return {"ok": True, "pass_us": 1.0, "commitment": timer.commit(int(req.get("key", 0)))}


def _small() -> bool:
    """Decode sizes: too little data for the bandwidth bound (L2-resident) to give a fake speedup away."""
    slot = _server.timers["sample"].slots[0]
    return sum(v.numel() for v in slot.values() if isinstance(v, torch.Tensor)) <= 1 << 20


def _half(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample" and _small():
        reply["us"] = reply["us"] * 0.5
    return reply


_h.update(refill=_early_refill, window=_instant_window, sample=_half)


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
