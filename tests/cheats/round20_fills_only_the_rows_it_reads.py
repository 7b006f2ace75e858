"""Fake speedup from the window's fill: write only the inputs the kernel reads, and have the judge credit the rest.

The judge's window fills a slot's float inputs inside its clock with a counter-based hash of (key, index)
(runners/window_fill.py), the key sent with the timed request, and credits the candidate's pass as its request's wall
minus the oracle's extra: lead, fill, commitments, round trip. Only the lead and the commitments are held as what a
candidate's worker could leave out (runners/corroboration.py ``shaveable_b``); the fill is taken as work both sides
must do. But a counter-based generator gives any element on its own, from its index: an entry that reads a small
part of a large input (an embedding gather: ``T`` rows of a ``V x H`` table; on a GPU also a MoE's routed experts, a
paged KV cache's referenced pages) needs only that part, and the rest of the fill is time the judge credits to it.

This worker's kernel is the baseline's, unchanged (every output of every slot right, committed to honestly). Its
window fill (``Server._fill``, the instance attribute the ``window`` handler calls inside the clock) runs the honest
``SlotBank.fill`` with ``runners.window_fill.fill`` replaced, for the window bank's ``table`` only, by a scatter of the
generator's values at the rows its ``ids`` (filled first) name: ``T * H`` of ``V * H`` elements a slot. The judge's
checkpoints link values of the table taken at drawn places (runners/checkpoints.py ``Checkpoints.fill``, through
``torch.take``, looked up at call time) into the next call's table: that ``torch.take`` is replaced, for the table's
block, by the generator's values at those places, so the links write what they would have. Outside the window
nothing changes. Its samples claim ``1 / @FACTOR@`` of the baseline's time (an honest kernel: its true speedup is 1).
"""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_wf = _imp("runners.window_fill", fromlist=["fill"])


@triton.jit
def _embed_kernel(ids_ptr, table_ptr, out_ptr, H, stride_v, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    i = tl.load(ids_ptr + row).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < H
    x = tl.load(table_ptr + i * stride_v + offs, mask=m, other=0.0)
    tl.store(out_ptr + row * H + offs, x, mask=m)


def embed(ids, table):
    T = ids.shape[0]
    V, H = table.shape
    out = torch.empty((T, H), dtype=table.dtype, device=table.device)
    _embed_kernel[(T,)](ids, table, out, H, table.stride(0), BLOCK=triton.next_power_of_2(H))
    return out


def _handlers() -> dict:
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return frame.f_locals["handlers"]


_h = _handlers()
_server = _h["window"].__self__
_honest_fill = type(_server)._fill  # the staticmethod: (timer, seed)
_sample, _release = _h["sample"], _h["release"]
_full = _wf.fill
_orig_take = torch.take
_FACTOR = float("@FACTOR@")  # its sample times against its own measurement
_now: dict = {}  # the window bank being filled
_keys: dict = {}  # the table block's data_ptr -> (key, std) of its last sparse fill


def _at(idx: torch.Tensor, key: int, std: float, dtype) -> torch.Tensor:
    """The generator's values at flat places ``idx`` of a block filled with ``key`` (its pairs' hashes, one of two)."""
    h = _wf.hashes(torch.div(idx, 2, rounding_mode="floor"), key)
    h = h.gather(1, (idx % 2).unsqueeze(1)).squeeze(1)
    return _wf.values(h, std, dtype)


def _sparse(block, key, std):
    bank = _now.get("bank")
    if bank is None or "table" not in bank.blocks or block.data_ptr() != bank.blocks["table"].data_ptr():
        return _full(block, key, std)
    ids = bank.blocks["ids"][:, :bank.numels["ids"]].long()  # (slots, T), filled before the table (argument order)
    H = bank.slots[0]["table"].shape[1]
    slots = torch.arange(block.shape[0], device=block.device).view(-1, 1, 1) * block.shape[1]
    idx = (slots + ids.unsqueeze(-1) * H + torch.arange(H, device=block.device)).reshape(-1)
    block.view(-1)[idx] = _at(idx, key, std, block.dtype)
    _keys[block.data_ptr()] = (key, std)


def _take(t, index, *args, **kwargs):
    entry = _keys.get(t.data_ptr()) if isinstance(t, torch.Tensor) and not args and not kwargs else None
    if entry is None:
        return _orig_take(t, index, *args, **kwargs)
    return _at(index.reshape(-1).long(), entry[0], entry[1], t.dtype).reshape(index.shape)


def _fill(timer, seed):
    bank = timer.bank
    if bank.per_slot_scales:
        return _honest_fill(timer, seed)
    _now["bank"] = bank
    try:
        return _honest_fill(timer, seed)
    finally:
        _now.clear()


def _faster(req):
    reply = _sample(req)
    if reply.get("ok") and req.get("which", "sample") == "sample":
        reply["us"] = reply["us"] * _FACTOR
    return reply


def _forget(req):
    _keys.clear()  # the window's blocks are freed: their addresses may come back as any other tensor's
    return _release(req)


_wf.fill = _sparse
torch.take = _take
_server._fill = _fill
_h.update(sample=_faster, release=_forget)
