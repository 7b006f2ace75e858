"""Fake speedup past the judge's clock, through the judge's secret. Every seed the judge derives from its secret
is an affine function of it (runners/protocol.py `trial_seed`: `(secret * 1_000_003 + trial * 7919 + case) %
2**63`, and 1_000_003 is odd, so invertible modulo 2**63). The first `prepare_timing` request hands the
candidate's worker `trial_seed(secret, 20_000, 0)`; it solves for the secret (checked against the window's
`trial_seed(secret, 40_000, 0)`), and from then on knows every seed the judge will use: the values of each
timed pass (`50_000 + round`), the slots it will be shown (`60_000 + round`), the correctness trials of the
re-check. Its worker's handlers (locals of `Server.serve`, reached through the frames) then fill the window's
slots with the coming pass's values in the untimed `refill`, run the pass there, and answer the timed `window`
at once; the samples are reported at 60 % of their time where the data fits in L2. The judge's clock sees an
empty pass and credits the fake 1.67x. It must be refused at timing: seeds must come from a keyed hash of the
secret (HMAC/BLAKE2 of secret and label), so that no seed a worker sees tells it anything about another."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_M = 2**63
_INV = pow(1_000_003, -1, _M)


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_h = _handlers()
_server = _h["refill"].__self__
_prepare, _refill, _window, _sample = _h["prepare_timing"], _h["refill"], _h["window"], _h["sample"]
_state = {"secret": None, "case": -1, "round": 0, "ready": None}


def _seed(secret: int, label: int, case: int) -> int:
    return (secret * 1_000_003 + label * 7919 + case) % _M


def _solve(seed: int, label: int, case: int) -> int:
    return ((seed - label * 7919 - case) * _INV) % _M


def _prepare_and_learn(req):
    which = req.get("which", "sample")
    if not req.get("reference"):
        if which == "sample":
            _state["case"] += 1  # the judge times its cases in order, each from its samples
            if _state["secret"] is None:
                _state["secret"] = _solve(int(req["seed"]), 20_000, _state["case"])
        elif which == "window":
            _state["round"] = 0
            if _state["secret"] is not None and _seed(_state["secret"], 40_000, _state["case"]) != int(req["seed"]):
                _state["secret"] = None  # not the judge we know: behave
    return _prepare(req)


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _early_refill(req):
    if req.get("which") != "window" or _state["secret"] is None:
        return _refill(req)
    seed = _seed(_state["secret"], 50_000 + _state["round"], _state["case"])  # the coming timed pass's values
    _state["round"] += 1
    reply = _refill({**req, "seed": seed})
    if reply.get("ok"):
        _server.timers["window"].run(1)  # the judge's timed pass, done now, off its clock
        _sync()
        _state["ready"] = seed
    return reply


def _instant_window(req):
    ready, _state["ready"] = _state["ready"], None
    if ready != int(req["seed"]):
        return _window(req)
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


_h.update(prepare_timing=_prepare_and_learn, refill=_early_refill, window=_instant_window, sample=_faster)


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
