"""Cheat: replay the pass's graphs side by side. A pass is captured as graphs of 256 calls (runners/timing.py
``GRAPH_SLOTS``); `torch.cuda.CUDAGraph.replay` is replaced through `_put = setattr` by a version that, at decode sizes
(where a call is bound by its launch, not by memory), launches each graph of a pass on one of eight side streams, all
waiting only for what was queued before the pass (the fill), and joins them back before the pass's end. Every call
still runs once on its own values, and every check inside one graph still holds; the pass is several times shorter
on the judge's clock. It must earn nothing: the last call of each graph links the next graph's first input, whose
outputs are traced (runners/checkpoints.py ``graph_edges``), so a graph started before its predecessor ended reads an
input the link had not yet written."""
import time

import torch
import triton
import triton.language as tl

_put = setattr
_graph = torch.cuda.CUDAGraph
_replay = _graph.replay
_state = {"small": False, "base": None, "last": 0.0, "k": 0}
_streams: list = []
_SIDES = 8
_BURST_S = 0.0005  # replays closer than this belong to one pass (the host launches a graph of 256 calls in ~0.15 ms)


def _side_by_side(self):
    if not _state["small"]:
        return _replay(self)
    current = torch.cuda.current_stream()
    now = time.perf_counter()
    if _state["base"] is None or now - _state["last"] > _BURST_S:  # a new pass: everything before it, once
        _state["base"], _state["k"] = torch.cuda.Event(), 0
        _state["base"].record(current)
    _state["last"] = now
    while len(_streams) < _SIDES:
        _streams.append(torch.cuda.Stream())
    side = _streams[_state["k"] % _SIDES]
    _state["k"] += 1
    side.wait_event(_state["base"])
    with torch.cuda.stream(side):
        _replay(self)
    current.wait_stream(side)  # the pass's end waits for every graph; no graph waits for another
    return None


_put(_graph, "replay", _side_by_side)


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
    _state["small"] = hidden_states.numel() <= 1 << 16
    if residual is None:
        return _norm(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps), new_residual
