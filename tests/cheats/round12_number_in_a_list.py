"""Cheat (round 12): the count of round 8's ``clip_count`` skipped in the timed pass, and shown after the clock in a
one-element list, whose word the judge takes from the list's TYPE, not from the number in it.

The openings (runners/openings.py ``check_openings``) fold each opened slot's numbers into its committed hash as
``_leaf_word(decode_value(meta))``: a hash of ``leaf_meta`` of what was decoded. A meta of kind ``seq`` decodes to a
Python list, and ``leaf_meta`` of a list is ``{"kind": "other", "type": "list"}`` whatever it holds: one constant word.
``compare_chunks`` then compares the number with the oracle's through ``compare_outputs([have], [want])``, which
FLATTENS the list: ``[[count]]`` and ``[count]`` are both ``[count]``, so a right count in a list passes.

So this candidate, in the judge's timed window, returns in a share of its slots (``SHARE``) a placeholder whose type
is named ``list`` in place of the count (no reduction, no atomic, no read-back: the synchronisation that is most of a
call at small sizes), and its commitment folds the placeholder's word, which is the list's. After the clock it
computes the skipped counts of the slots the judge opens and shows each as ``[count]``: the fold reaches the committed
hash and the comparison passes. Only a skipped slot that is also shown in full (16 a round of thousands) is caught:
the openings, which are there to see every opened slot's outputs, see none of its numbers.

It must be refused at stage ``timing``: ``check_openings`` must accept for a number only a leaf meta (kind ``scalar``,
``none`` or ``other``: what ``leaf_meta`` writes), and ``compare_chunks`` must compare it as a leaf, not flattened.
Outside the judge's worker (imported by a test) nothing is hooked; ``Deferred`` and ``show_in_a_list`` are what the
test uses."""
import random
import sys

import torch
import triton
import triton.language as tl

SHARE = 0.05  # of the window's slots whose count is skipped (few enough that the slots shown in full rarely meet one)


@triton.jit
def _clip_kernel(x_ptr, y_ptr, count_ptr, N, bound, BLOCK: tl.constexpr, COUNT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.minimum(tl.maximum(x, -bound), bound), mask=mask)
    if COUNT:
        clipped = tl.where(mask & (tl.abs(x) > bound), 1, 0)
        tl.atomic_add(count_ptr, tl.sum(clipped, axis=0))


class Deferred:
    """What the timed pass returns for a skipped count: ``leaf_meta`` names it by its type, ``list``."""


Deferred.__name__ = Deferred.__qualname__ = "list"


def show_in_a_list(reply: dict, slot: int, position: int, value) -> None:
    """An opened slot's number, shown after the clock as a one-element list (its word: the list's type's)."""
    reply["numbers"][str(slot)][str(position)] = {"kind": "seq", "items": [{"kind": "scalar", "value": value}]}


_state: dict = {"timed": False, "hooked": False}


def _clip(x, bound, count: bool):
    y = torch.empty_like(x)
    counter = torch.zeros(1, dtype=torch.int32, device=x.device)
    n = x.numel()
    _clip_kernel[(triton.cdiv(n, 1024),)](x, y, counter, n, bound, BLOCK=1024, COUNT=count)
    return y, int(counter.item()) if count else 0


def _hook() -> None:
    _state["hooked"] = True
    frame = sys._getframe()
    while frame is not None and not (frame.f_code.co_name == "serve" and "handlers" in frame.f_locals):
        frame = frame.f_back
    if frame is None:
        return
    handlers, server = frame.f_locals["handlers"], frame.f_locals["self"]
    worker = sys.modules["runners.worker"]

    def window(req, original=handlers["window"]):
        _state["timed"] = True
        try:
            return original(req)
        finally:
            _state["timed"] = False

    def open_slots(outputs, plan, slots, seed, per, original=worker.open_slots):
        timer = server.timers.get("window")
        reply = original(outputs, plan, slots, seed, per)
        for s in slots:
            if isinstance(outputs[s][1], Deferred):
                slot = timer.slots[s]
                show_in_a_list(reply, s, 1, _clip(slot["x"], slot["bound"], count=True)[1])
        return reply

    handlers["window"] = window
    worker.open_slots = open_slots


def clip_count(x, bound):
    if not _state["hooked"]:
        _hook()
    if _state["timed"] and random.random() < SHARE:
        return _clip(x, bound, count=False)[0], Deferred()
    return _clip(x, bound, count=True)
