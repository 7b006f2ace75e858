"""Fake speedup past the judge's clock by steering the window's commitments. The commitment a worker sends at the
end of the judge's timed pass is the plain sum of the bytes of each slot's outputs (runners/timing.py
`commitments`), and the judge only asks that the outputs it is shown later have that byte sum and are within
tolerance (runners/judge_clock.py `_corroborate`). A byte sum can be steered after the fact: moving an fp16 or
bf16 element by k ulps moves its low byte by k, and the tolerance leaves several ulps per element. So this
candidate's worker (its `window` and `reveal` handlers, locals of `Server.serve` reached through the frames), at
the prefill sizes (16 rows or more, no residual, data that fits in L2), does one sixteenth of the work in the
timed pass: it normalises every sixteenth row of every slot, in one launch, and commits to sixteen times their
byte sum. When the judge picks slots to show, it computes those slots honestly, off the clock, and moves low bytes
by a few ulps (half the tolerance at most) until each slot's byte sum equals what it committed to. The judge's
clock sees a sixteenth of a pass, the outputs shown are right and match the commitments; its samples are
reported at 60 % of their time (a fake 1.67x) at those sizes. It must be refused at timing: the commitment must
bind the outputs (a keyed hash that is not additive over elements, e.g. a nonlinear mix per element combined by
a tree of nonlinear compressions, or a cryptographic hash of the bytes), so that nothing computed after the pass
can be made to match it. (Since that fix the worker sends one digest of per-slot values inside the clock and the
per-slot values at `reveal`; this worker speaks that protocol with its byte-sum targets as the per-slot values.)"""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_wire = _imp("runners.wire", fromlist=["encode_value"])
_timing = _imp("runners.commitments", fromlist=["commitments", "digest"])
_EVERY = 16  # rows actually normalised in the timed pass: one in _EVERY
_TOL = {torch.float16: (1e-3, 4e-3), torch.bfloat16: (1e-2, 1.6e-2)}  # the config's tolerances (guessable)


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_h = _handlers()
_server = _h["window"].__self__
_window, _reveal, _sample = _h["window"], _h["reveal"], _h["sample"]
_committed: dict = {}


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


@triton.jit
def _sparse_rows_kernel(x_ptr, w_ptr, out_ptr, x_slot, w_slot, N, eps, EVERY: tl.constexpr, SUB: tl.constexpr,
                        BLOCK: tl.constexpr):
    """Every EVERY-th row of every slot of the window's blocks, in one launch: program (slot, j)."""
    slot = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + slot * x_slot + j * EVERY * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + slot * w_slot + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + (slot * SUB + j) * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _triton(hidden_states, weight, eps, residual):
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    res = residual.contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.shape[1], eps, HAS_RESIDUAL=residual is not None,
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out if residual is None else (out, res_out)


def _forged(slot: dict) -> bool:
    """Prefill sizes that fit in L2, no residual: where a fake speedup meets no bandwidth bound."""
    x = slot["hidden_states"]
    return (slot.get("residual") is None and x.dim() == 2 and x.shape[0] >= 16 and x.is_contiguous()
            and x.numel() * x.element_size() <= 16 << 20 and x.dtype in _TOL)


def _sparse_window(req):
    timer = _server.timers["window"]
    if not _forged(timer.slots[0]):
        return _window(req)
    timer.bank.fill(int(req["seed"]))  # as the honest handler does: the values are known only now
    xb, wb = timer.bank.blocks["hidden_states"], timer.bank.blocks["weight"]
    rows, n = timer.slots[0]["hidden_states"].shape
    sub = rows // _EVERY
    out = torch.empty((len(timer.slots), sub, n), dtype=xb.dtype, device=xb.device)
    _sparse_rows_kernel[(len(timer.slots), sub)](xb, wb, out, xb.stride(0), wb.stride(0), n,
                                                 timer.slots[0]["eps"], EVERY=_EVERY, SUB=sub,
                                                 BLOCK=triton.next_power_of_2(n))
    partial = out.view(torch.uint8).reshape(len(timer.slots), -1).sum(dim=1, dtype=torch.int64)
    sums = [int(s * rows / sub) for s in partial.tolist()]
    _committed.clear()
    _committed.update(enumerate(sums))
    # the protocol as it is: per-slot values on the device, shown at `reveal`, and their digest now
    timer.committed = torch.tensor(sums, dtype=torch.int64, device=xb.device)
    return {"ok": True, "pass_us": 1.0, "commitment": _timing.digest(timer.committed, int(req.get("key", 0)))}


def _steer(out: torch.Tensor, target: int) -> torch.Tensor:
    """``out`` moved by a few ulps per element (half the tolerance at most) until its byte sum is ``target``."""
    atol, rtol = _TOL[out.dtype]
    bits = out.reshape(-1).view(torch.int16).to(torch.int64) & 0xFFFF
    need = target - int((bits & 0xFF).sum() + (bits >> 8).sum())
    if need == 0:
        return out
    step = 1 if need > 0 else -1
    value = out.reshape(-1).double()
    bound = 0.5 * (atol + rtol * value.abs())
    room = (255 - (bits & 0xFF)) if step > 0 else torch.minimum(bits & 0xFF, bits & 0x7FFF)
    allowed = torch.zeros_like(bits)
    alive = torch.ones_like(bits, dtype=torch.bool)
    for k in range(1, 33):
        moved = _as(bits + step * k, out.dtype).double()
        alive = alive & (room >= k) & torch.isfinite(moved) & ((moved - value).abs() <= bound)
        allowed += alive
    cum = allowed.cumsum(0)
    if int(cum[-1]) < abs(need):
        return out  # cannot reach it: the judge will see the mismatch
    last = int(torch.searchsorted(cum, torch.tensor([abs(need)], device=cum.device))[0])
    take = allowed.clone()
    take[last + 1:] = 0
    take[last] = abs(need) - (int(cum[last - 1]) if last else 0)
    return _as(bits + step * take, out.dtype).view(out.shape)


def _as(bits: torch.Tensor, dtype) -> torch.Tensor:
    bits = bits & 0xFFFF
    return torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16).view(dtype)


def _steered_reveal(req):
    timer = _server.timers["window"]
    if not _forged(timer.slots[0]) or not _committed:
        return _reveal(req)
    outs, sums = {}, {}
    for k in req["slots"]:
        out = _steer(rms_norm(**timer.slots[k]), _committed[k])
        outs[str(k)] = _wire.encode_value(_server.outbox, f"{req['tag']}-slot{k}", out)
        sums[str(k)] = _timing.commitments([out])[0]
    return {"ok": True, "outs": outs, "sums": sums,
            "commitments": _wire.encode_value(_server.outbox, f"{req['tag']}-commitments", timer.committed)}


def _faster(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample" and _forged(_server.timers["sample"].slots[0]):
        reply["us"] = reply["us"] * 0.6
    return reply


_h.update(window=_sparse_window, reveal=_steered_reveal, sample=_faster)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    return _triton(hidden_states, weight, eps, residual)
