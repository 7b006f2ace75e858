"""Fake speedup past the binding commitments: the digest of the judge's window is steered after the slots to show
are known. The worker's timed reply carries one digest of its per-slot hashes (runners/timing.py ``digest``: a
tree of ``_compress(a, b, alpha) = rot32(a + alpha*b) * (2b + 1)`` over the hashes, then the length and key folded
in); the per-slot hashes themselves come later, in a file written at ``reveal``, when the worker has been told which
slots the judge will check (runners/judge_clock.py ``_corroborate`` / ``_window_hashes``: it asks only that the file
hash to the digest and that each SHOWN slot's outputs hash to its entry). ``_compress`` is a bijection in its first
word for a fixed second one, undone in three operations (``a = rot32(r * inverse(2b + 1)) - alpha*b`` modulo
2**64), and so are the two folds of the tail. So, from any root
and any values for the other leaves, the leftmost leaf that makes the tree end at that root is computed directly,
level by level down the left edge: no search. Slot 0 is not shown (16 slots of up to 8192 are), so its entry is
free.

This candidate's kernel is honest. Its worker (its ``window``, ``reveal``, ``sample`` and ``prepare_timing``
handlers, locals of ``Server.serve`` reached through the frames) runs only every other slot in the judge's timed
pass (on CUDA a graph of its own captured over the even slots) and answers with an arbitrary digest, at once;
it computes the shown slots honestly at ``reveal``, off the clock, puts their true hashes in the file, any values
elsewhere, and slot 0's entry solved so that the file hashes to the digest it sent. Its sample times are reported
at half. The judge's clock sees half a pass (less the commitments it skipped): the claimed 2x is corroborated and
credited. Where slot 0 is shown (16 in 8192 a round at decode sizes) it cannot solve without a search of 2**32 per
level (the same equation in the second word: the low 32 bits of the result are linear in the high half of ``b``
given its low half) and it is refused that round. Sizes above 16 MB of input are left honest (a bandwidth bound
would quarantine a fake 2x there)."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_wire = _imp("runners.wire", fromlist=["encode_value"])
_timing = _imp("runners.commitments", fromlist=["commitments", "digest", "_constant", "_padded_words"])
_M = (1 << 64) - 1


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_h = _handlers()
_server = _h["window"].__self__
_window, _reveal, _sample, _prepare = _h["window"], _h["reveal"], _h["sample"], _h["prepare_timing"]
_state: dict = {}


@triton.jit
def _rms_kernel(x_ptr, r_ptr, w_ptr, out_ptr, r_out_ptr, sx, sr, N, eps, HAS_RESIDUAL: tl.constexpr,
                BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(r_ptr + row * sr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(r_out_ptr + row * N + offs, x.to(r_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1]) if hidden_states.dim() != 2 else hidden_states
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    r = x
    if residual is not None:
        r = residual.reshape(-1, n) if residual.dim() != 2 else residual
        r = r if r.stride(-1) == 1 else r.contiguous()
    r_out = torch.empty_like(out) if residual is not None else out
    _rms_kernel[(rows,)](x, r, weight, out, r_out, x.stride(0), r.stride(0), n, eps,
                         HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(n))
    if residual is None:
        return out.view(shape)
    return out.view(shape), r_out.view(shape)


# ---- the digest, undone on Python ints -----------------------------------------------------------------------
def _rot(v: int) -> int:
    return ((v >> 32) | (v << 32)) & _M


def _compress(a: int, b: int, alpha: int) -> int:
    return (_rot((a + alpha * b) & _M) * (2 * b + 1)) & _M


def _undo(r: int, b: int, alpha: int) -> int:
    """The ``a`` with ``_compress(a, b, alpha) == r``: one multiplication by an inverse, a rotation, a subtraction."""
    return (_rot((r * pow(2 * b + 1, -1, 1 << 64)) & _M) - alpha * b) & _M


def _signed(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


def _forge_leaf0(hashes: list[int], key: int, root: int) -> list[int]:
    """``hashes`` with entry 0 replaced so that ``digest(hashes, key) == root``."""
    k = key ^ 0x5A5A
    n = len(hashes)
    words = [h & _M for h in hashes] + [0] * (_timing._padded_words(8 * n) - n)
    levels = []
    x = words
    while len(x) > 1:
        if len(x) % 2:
            x = x + [0]
        levels.append(x)
        alpha = (_timing._constant(k, len(levels) - 1) | 1) & _M
        x = [_compress(x[2 * i], x[2 * i + 1], alpha) for i in range(len(x) // 2)]
    tail = _timing._constant(k, 1000 + 8 * n) & _M
    target = _undo(_undo(root & _M, tail, (_timing._constant(k, 998) | 1) & _M), tail,
                   (_timing._constant(k, 999) | 1) & _M)
    for level in reversed(range(len(levels))):  # down the left edge: node 0 of each level from its right sibling
        alpha = (_timing._constant(k, level) | 1) & _M
        target = _undo(target, levels[level][1], alpha)
    return [_signed(target)] + [_signed(h) for h in words[1:n]]


# ---- the worker's handlers -------------------------------------------------------------------------------------
def _forged(slot: dict) -> bool:
    x = slot["hidden_states"]
    size = x.numel() * x.element_size() * (2 if slot.get("residual") is not None else 1)
    return size <= 16 << 20


def _prepare_timing(req):
    reply = _prepare(req)
    timer = _server.timers.get("window")
    if reply.get("ok") and req.get("which") == "window" and _forged(timer.slots[0]) and timer.graph is not None:
        half = torch.cuda.CUDAGraph()  # every other slot, in a graph of its own (warm: the timer's capture ran)
        with torch.cuda.graph(half):
            for kwargs in timer.slots[::2]:
                rms_norm(**kwargs)
        timer.half = half
    return reply


def _half_window(req):
    timer = _server.timers["window"]
    if not _forged(timer.slots[0]):
        _state.clear()
        return _window(req)
    timer.bank.fill(int(req["seed"]))  # the values are known only now, as for the honest handler
    if getattr(timer, "half", None) is not None:
        timer.half.replay()
    else:
        for kwargs in timer.slots[::2]:
            rms_norm(**kwargs)
    if timer.slots[0]["hidden_states"].is_cuda:
        torch.cuda.synchronize()  # the half pass is done when the reply goes (it need not be: see the report)
    key = int(req.get("key", 0))
    root = _signed(_timing._constant(key, 4242) & _M)  # any number will do
    _state.update(key=key, root=root)
    return {"ok": True, "pass_us": 1.0, "commitment": root}


def _steered_reveal(req):
    timer = _server.timers["window"]
    if not _state:
        return _reveal(req)
    key, shown = _state["key"], [int(k) for k in req["slots"]]
    outs, sums = {}, {}
    hashes = [0] * len(timer.slots)
    for k in shown:  # computed now, honestly, on the values the fill left in the slots
        out = rms_norm(**timer.slots[k])
        outs[str(k)] = _wire.encode_value(_server.outbox, f"{req['tag']}-slot{k}", out)
        sums[str(k)] = _timing.commitments([out])[0]
        hashes[k] = _timing.commitments([out], key)[0]
    forged = torch.tensor(_forge_leaf0(hashes, key, _state["root"]) if 0 not in shown else hashes, dtype=torch.int64)
    return {"ok": True, "outs": outs, "sums": sums,
            "commitments": _wire.encode_value(_server.outbox, f"{req['tag']}-commitments", forged)}


def _faster(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample" and _forged(_server.timers["sample"].slots[0]):
        reply["us"] = reply["us"] * 0.5
    return reply


_h.update(window=_half_window, reveal=_steered_reveal, sample=_faster, prepare_timing=_prepare_timing)
