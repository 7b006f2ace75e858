"""Fake speedup past the judge's clock, through the warm-up seed. Before each timed pass of its window the judge
sends an untimed `refill` with a warm-up seed, and that seed is the timed pass's own seed XOR a constant
(runners/judge_clock.py `_corroborate`: `seed=seed ^ 0x5A5A`). This candidate's worker (its request handlers, a
local of `Server.serve` reached through the frames) undoes the XOR in `refill`, fills the window's slots with the
values of the coming timed pass and runs the whole pass there, before the judge's clock starts; `window` then
answers at once with the commitments of outputs it already has. The revealed outputs are right and match the
commitments, and the judge's clock sees an empty pass, so any claimed speedup is "corroborated": the samples
are reported at 60 % of their time wherever the data fits in L2 (no bandwidth bound there), a fake 1.67x. It
must be refused at timing: nothing the worker is told before the timed request may determine the timed pass's
values (an independent warm-up seed, e.g. `trial_seed(secret, 55_000 + round, index)`), and a pass shorter than
the oracle's by more than the clock's resolution should itself be suspicious."""
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
_server = _h["refill"].__self__
_refill, _window, _sample = _h["refill"], _h["window"], _h["sample"]
_ready = {}


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _early_refill(req):
    if req.get("which") != "window":
        return _refill(req)
    seed = int(req["seed"]) ^ 0x5A5A  # the seed of the coming timed pass
    reply = _refill({**req, "seed": seed})
    if reply.get("ok"):
        _server.timers["window"].run(1)  # the judge's timed pass, done now, off its clock
        _sync()
        _ready["seed"] = seed
    return reply


def _instant_window(req):
    if _ready.pop("seed", None) != int(req["seed"]):
        return _window(req)  # the judge's seeds are not related (fixed judge): behave
    timer = _server.timers["window"]
    return {"ok": True, "pass_us": 1.0, "commitment": timer.commit(int(req.get("key", 0)))}


def _fits_in_l2() -> bool:
    slot = _server.timers["sample"].slots[0]
    return sum(v.numel() * v.element_size() for v in slot.values() if isinstance(v, torch.Tensor)) <= 16 << 20


def _faster(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample" and _fits_in_l2():
        reply["us"] = reply["us"] * 0.6
    return reply


_h.update(refill=_early_refill, window=_instant_window, sample=_faster)


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
