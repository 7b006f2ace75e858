"""Cheat (round 19): a candidate worker that is gone before the judge sends its next request.

The entry is ``tile_rows(x, n)``: ``n`` rows, each twice ``x`` (tests/test_judge_attacks_round19.py's bundle). The
values are the baseline's. At its first call it rewrites the worker's reply path (runners/wire.py ``Channel.send``):
the reply to that call goes out after the worker has closed its end of the request pipe, and the worker then exits.
The judge reads the reply, compares it (right), and sends the next trial's request: on a paired trial
(runners/judge.py ``_trial_calls``, ``concurrent``) the oracle's request first, then the candidate's, which meets a
pipe with no reader (PeerGone) while the oracle's request is in flight."""
import os

import torch
import triton
import triton.language as tl

_armed = []


@triton.jit
def _tile_kernel(x_ptr, out_ptr, H, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < H
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * H + offs, x * 2.0, mask=mask)


def _arm():
    from runners import wire

    send = wire.Channel.send

    def leave_after(self, message):
        if "out" in message:  # this call's reply: the request pipe is closed first, so no later request is read
            os.close(self.read_fd)
            send(self, message)
            os._exit(0)
        send(self, message)

    wire.Channel.send = leave_after


def tile_rows(x, n):
    if not _armed:
        _armed.append(True)
        _arm()
    H = x.shape[0]
    out = torch.empty((n, H), dtype=x.dtype, device=x.device)
    _tile_kernel[(n,)](x, out, H, BLOCK=triton.next_power_of_2(H))
    return out
