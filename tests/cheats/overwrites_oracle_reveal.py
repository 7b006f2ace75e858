"""Fake speedup with wrong timed outputs: the candidate's worker does no work at all in the judge's window (its
request handlers, a local of `Server.serve` reached through the frames, are replaced: it commits to the stale
outputs of the warm-up pass), and when the judge asks both workers to reveal slots (the oracle first), it writes
its stale outputs over the oracle's revealed files as well: the oracle's outbox is a sibling folder of the same
user. The judge decodes both only after both replies, so it compares the candidate's stale outputs with
themselves. Samples are reported at half their time at decode sizes (a fake 2x). It must be refused: the judge
must read the oracle's revealed outputs before asking the candidate (or keep them where the candidate cannot
write), and check them against the oracle's own commitments."""
import glob
import os

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
_server = _h["reveal"].__self__
_reveal, _sample = _h["reveal"], _h["sample"]


def _idle_window(req):
    timer = _server.timers["window"]  # outputs of the warm-up pass, on other values
    return {"ok": True, "pass_us": 1.0, "commitment": timer.commit(int(req.get("key", 0)))}


def _reveal_over_the_oracle(req):
    reply = _reveal(req)
    mine = str(_server.outbox)
    for theirs in glob.glob(os.path.join(os.path.dirname(os.path.dirname(mine)), "oracle-*", "out")):
        for path in glob.glob(os.path.join(mine, f"{req['tag']}-slot*.bin")):
            with open(path, "rb") as src, open(os.path.join(theirs, os.path.basename(path)), "wb") as dst:
                dst.write(src.read())
    return reply


def _small() -> bool:
    """Decode sizes: too little data for the bandwidth bound (L2-resident) to give a fake speedup away."""
    slot = _server.timers["sample"].slots[0]
    return sum(v.numel() for v in slot.values() if isinstance(v, torch.Tensor)) <= 1 << 20


def _half(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample" and _small():
        reply["us"] = reply["us"] * 0.5
    return reply


_h.update(window=_idle_window, reveal=_reveal_over_the_oracle, sample=_half)


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
