"""Fake speedup from the judge's own arithmetic: the candidate's pass by the judge's clock is its wall time minus
the oracle's extra (runners/judge_clock.py `corroborate`: `pass_c = min(walls_c) - extra`, `extra` = the oracle's
wall minus its own event time of the pass), i.e. the judge assumes the candidate spends what the oracle spends
around its pass: the lead sleep, the commitments (a copy of every slot's outputs into one block and a byte sum:
at T=512, 715 slots of 4 MB, about as long as the pass itself) and the round trip. A candidate decides its own
extra. This one (an honest kernel) computes each row's byte sum in its kernel's epilogue, while the row is still
in registers, into a buffer per slot; its worker's `window` handler (a local of `Server.serve`, reached through
the frames) skips the lead sleep and the copy and answers with the sums of those buffers, which are exactly the
byte sums the judge recomputes from the revealed outputs. At the prefill size the judge's clock then sees a pass
several times shorter than the oracle's, and the samples, reported at 60 % of their time there (data in L2, no
bandwidth bound), are "corroborated": a fake 1.67x, ok. It must be refused at timing: nothing the candidate's
process does around the pass may count as pass time; the pass must be long against any fixed cost (several
distinct-value passes per timed request), or the candidate's extra measured on the candidate itself under the
same commitments the judge computes from outside. (Since the commitments became a keyed tree hash of each slot's
bytes, runners/timing.py, the row sums no longer stand in for them: this worker now computes them as the honest one
does and sheds only the lead sleep.)"""
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
_server = _h["window"].__self__
_window, _sample = _h["window"], _h["sample"]
_rowsums: dict = {}  # (block storage, slots, rows) -> int32 byte sums per slot and row, written by the kernel


@triton.jit
def _rms_kernel(x_ptr, r_ptr, w_ptr, out_ptr, r_out_ptr, sums_ptr, N, eps, HAS_RESIDUAL: tl.constexpr,
                ROW_SUMS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(r_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(r_out_ptr + row * N + offs, x.to(r_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = (x * rstd * w).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + row * N + offs, y, mask=mask)
    if ROW_SUMS:  # the commitment, for free: the bytes of this row of the output
        b = y.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
        tl.store(sums_ptr + row, tl.sum(tl.where(mask, (b & 0xFF) + (b >> 8), 0), axis=0))


def _forged(x, residual) -> bool:
    """Prefill sizes that fit in L2, no residual: where a fake speedup meets no bandwidth bound."""
    return (residual is None and x.dim() == 2 and x.shape[0] >= 64 and x.is_contiguous()
            and x.numel() * x.element_size() <= 16 << 20 and x.element_size() == 2)


def _slot_sums(x):
    """The row-sum buffer of this call's slot, when ``x`` is one slot of a block of several (the timed slots)."""
    storage = x.untyped_storage()
    slot_bytes = -(-x.numel() * x.element_size() // 256) * 256
    slots = storage.nbytes() // slot_bytes
    if slots < 2 or (x.storage_offset() * x.element_size()) % slot_bytes:
        return None
    key = (storage.data_ptr(), slots, x.shape[0])
    if key not in _rowsums:
        _rowsums[key] = torch.zeros((slots, x.shape[0]), dtype=torch.int32, device=x.device)
    return _rowsums[key][x.storage_offset() * x.element_size() // slot_bytes]


def _key(x):
    slot_bytes = -(-x.numel() * x.element_size() // 256) * 256
    return (x.untyped_storage().data_ptr(), x.untyped_storage().nbytes() // slot_bytes, x.shape[0])


def _window_without_extra(req):
    timer = _server.timers["window"]
    x = timer.slots[0]["hidden_states"]
    if timer.graph is None or not _forged(x, timer.slots[0].get("residual")) or _key(x) not in _rowsums:
        return _window(req)
    timer.bank.fill(int(req["seed"]))  # the values, known only now, as the honest handler does
    timer.run(1)  # the pass: no lead sleep, no commitment copy
    return {"ok": True, "pass_us": 1.0, "commitment": timer.commit(int(req.get("key", 0)))}


def _faster(req):
    reply = _sample(req)
    slot = _server.timers["sample"].slots[0]
    if reply.get("ok") and req.get("which", "sample") == "sample" and _forged(slot["hidden_states"],
                                                                              slot.get("residual")):
        reply["us"] = reply["us"] * 0.6
    return reply


_h.update(window=_window_without_extra, sample=_faster)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    sums = _slot_sums(hidden_states) if _forged(hidden_states, residual) else None
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    res = residual.contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_kernel[(x.shape[0],)](x, res, weight, out, res_out, sums if sums is not None else out, x.shape[1], eps,
                               HAS_RESIDUAL=residual is not None, ROW_SUMS=sums is not None,
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out if residual is None else (out, res_out)
