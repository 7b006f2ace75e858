"""Fake speedup from the judge's arithmetic, tuned against the allowance for what a worker can skip. The judge
credits a speedup only as far as its own clock saw it (runners/judge_clock.py: `cap = judge_speedup * 1.05`,
and nothing when the clock does not resolve the size), and since the H200 attack run it widens the allowance by
the oracle's lead sleep and commitment time (`shaveable_b`), what a candidate's worker could leave out. But the
judge's speedup itself is still `pass_b / (min(walls_c) - extra)` with the oracle's whole extra subtracted: a
candidate that skips part of that extra is still credited with it. This one (an honest kernel) writes each row's
byte sum in its kernel's epilogue, as tests/cheats/sheds_the_window_extra.py does, but keeps the lead sleep and
sheds at most half a pass: in the judge's first round (a warm-up the judge leaves out) it runs the honest window
and measures the commitments' cost; afterwards it skips them and sleeps on the device for the cost minus half a
pass. The judge's clock then sees a pass of about half the oracle's (resolved, above its floor of a tenth), the
samples are reported at 60 % of their time at the prefill size that fits in L2, and the credit is the fake 1.67x.
It must be refused, or credited nothing: the credit must come from the candidate's wall minus only the part of
the extra it cannot skip (`min(walls_c) - (extra - shave)`), so that skipping anything gains nothing.

Since the commitments became a keyed tree hash of each slot's bytes (runners/timing.py), the epilogue's byte sums
no longer stand in for them: this worker computes them as the honest one does, and sheds nothing. Rewriting it
against the hash (an implementation of it cheaper than the oracle's, e.g. fused into the kernel) is left open.

GPU only (bench/judge_attacks_gpu.py); on any surprise it falls back to the honest handlers."""
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


_calibration: dict = {}


def _device_us(work) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0


def _window_partly_shed(req):
    timer = _server.timers["window"]
    x = timer.slots[0]["hidden_states"]
    if timer.graph is None or not _forged(x, timer.slots[0].get("residual")) or _key(x) not in _rowsums:
        return _window(req)
    try:
        cal = _calibration if _calibration.get("timer") is timer else None
        if cal is None:  # the judge's first round, left out as a warm-up: honest, and measured
            reply = _window(req)
            if reply.get("ok") and timer.plan is not None:
                _calibration.clear()
                _calibration.update(timer=timer, pass_us=float(reply["pass_us"]),
                                    commit_us=_device_us(lambda: timer.commit(0)),
                                    per_us=2_000_000 / _device_us(lambda: torch.cuda._sleep(2_000_000)))
            return reply
        lead = int(req.get("lead_cycles", 0))
        if lead:
            torch.cuda._sleep(lead)  # the lead, as the oracle has it
        timer.bank.fill(int(req["seed"]))
        timer.run(1)
        # (the commitment is a keyed hash now: the epilogue's row sums no longer stand in for it, so there is
        # nothing of it left to shed, and no sleep for the part kept)
        return {"ok": True, "pass_us": 1.0, "commitment": timer.commit(int(req.get("key", 0)))}
    except Exception:  # noqa: BLE001 - whatever changed in the harness: behave
        return _window(req)


def _faster(req):
    reply = _sample(req)
    slot = _server.timers["sample"].slots[0]
    if reply.get("ok") and req.get("which", "sample") == "sample" and _forged(slot["hidden_states"],
                                                                              slot.get("residual")):
        reply["us"] = reply["us"] * 0.6
    return reply


_h.update(window=_window_partly_shed, sample=_faster)


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
