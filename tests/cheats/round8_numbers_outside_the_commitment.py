"""Cheat (round 8): the numbers an entry returns are left out of the window's commitments, so they can be made up
in the timed pass and put right when the judge asks to see them.

``clip_count(x, bound)`` returns the clipped tensor and, as a Python int, how many elements were clipped (a statistic
its callers log; the baseline counts with an atomic in its kernel and reads the count back). runners/timing.py
``CommitPlan`` commits to every slot's TENSOR outputs only ("what is not a tensor is left out"), and the judge then
compares each shown slot's outputs, numbers included, with the oracle's. This candidate skips the count (the
reduction, the atomic and the read-back: a synchronisation per call on the GPU, which also keeps the baseline from
being captured in a graph) in every timed request, returning 0, and fills in the right count for the slots the judge
asks to see, inside its own process, before the harness's ``reveal`` reads them: it takes the worker's request table
(the ``handlers`` of ``runners.worker.Server.serve``, one frame up from any call) and wraps ``sample``, ``window``
(timed: skip) and ``reveal`` (recompute for the shown slots from their inputs). Everything it shows matches the
oracle's and the tensor commitments; the judge's clock saw the pass without the count, and credits it.

It must be refused at stage ``timing``: every output of a slot, numbers, strings and None included (and the
structure), must be inside the commitment (``CommitPlan`` folding a canonical encoding of each non-tensor leaf, the
judge's ``commitment_of`` the same), so that a number changed after the clock no longer matches."""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _clip_kernel(x_ptr, y_ptr, count_ptr, N, bound, BLOCK: tl.constexpr, COUNT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.minimum(tl.maximum(x, -bound), bound), mask=mask)
    if COUNT:
        clipped = tl.where(mask & (tl.abs(x) > bound), 1, 0)
        tl.atomic_add(count_ptr, tl.sum(clipped, axis=0))


_state: dict = {"timed": False, "hooked": False}


def _clip(x, bound, count: bool):
    y = torch.empty_like(x)
    counter = torch.zeros(1, dtype=torch.int32, device=x.device)
    n = x.numel()
    _clip_kernel[(triton.cdiv(n, 1024),)](x, y, counter, n, bound, BLOCK=1024, COUNT=count)
    return y, int(counter.item()) if count else 0


def _hook() -> None:
    """Wrap the worker's timed requests and its reveal (the request table is a local of ``Server.serve``)."""
    _state["hooked"] = True
    frame = sys._getframe()
    while frame is not None and not (frame.f_code.co_name == "serve" and "handlers" in frame.f_locals):
        frame = frame.f_back
    if frame is None:
        return
    handlers, server = frame.f_locals["handlers"], frame.f_locals["self"]

    def timed(original):
        def request(req):
            _state["timed"] = True
            try:
                return original(req)
            finally:
                _state["timed"] = False
        return request

    def reveal(req, original=handlers["reveal"]):
        timer = server.timers.get("window")
        for k in req.get("slots", []):
            slot = timer.slots[k]
            timer.outputs[k] = _clip(slot["x"], slot["bound"], count=True)
        return original(req)

    handlers["sample"], handlers["window"], handlers["reveal"] = timed(handlers["sample"]), \
        timed(handlers["window"]), reveal


def clip_count(x, bound):
    if not _state["hooked"]:
        _hook()
    return _clip(x, bound, count=not _state["timed"])
