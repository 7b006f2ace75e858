"""Cheat (round 33, GPU): tests/cheats/overlaps_graph_replays.py with its graph boundaries moved off the judge's.
runners/checkpoints.py ``graph_edges`` checks both sides of every multiple of runners/timing.py ``GRAPH_SLOTS``, where
the judge assumes a worker's graphs meet. The graphs are captured in this process, though (``SlotTimer.prepare``),
after ``prepare_timing`` handed it the checkpoints' calls (``self.checks.at``). ``prepare`` is replaced through
``_put = setattr``: after the worker's own capture it captures the window's pass again, in runs that end where no
checkpoint's link crosses (the last call of a run is not in ``at``), each run in a pool of its own, so that no graph
reads what another writes. ``CUDAGraph.replay`` is replaced as in overlaps_graph_replays.py: at decode sizes each
graph of a pass goes to one of eight side streams, joined before the pass's end. Every trace, link and output is the
oracle's; the pass is several times shorter on the judge's clock (tests/test_judge_attacks_round33.py shows the
checkpoints' side on the CPU). The class of round 16: a worker that knows which calls are checked."""
import time

import torch
import triton
import triton.language as tl

_put = setattr
_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_timer = _imp("runners.timing", fromlist=["SlotTimer"]).SlotTimer
_prepare = _timer.prepare
_graph = torch.cuda.CUDAGraph
_replay = _graph.replay
_state = {"small": False, "base": None, "last": 0.0, "k": 0}
_streams: list = []
_SIDES = 8
_RUN = 256
_BURST_S = 0.0005  # replays closer than this belong to one pass


def _bounds(count: int, at: set) -> list[tuple[int, int]]:
    """Runs of about _RUN calls, each ending where no link crosses into the next."""
    runs, start = [], 0
    while start < count:
        stop = min(count, start + _RUN)
        while stop < count and stop - 1 in at:
            stop += 1
        runs.append((start, stop))
        start = stop
    return runs


def _split_prepare(self):
    method = _prepare(self)
    if method != "cuda-graph" or self.checks is None or not _state["small"]:
        return method
    # the traces' buffers made now, outside any capture: zeroed once, not by a graph that races the others
    self.checks.buffers = {j: torch.zeros_like(b) for j, b in self.checks.buffers.items()}
    graphs, outs = [], []
    for start, stop in _bounds(len(self.slots), set(self.checks.at)):
        graph = _graph()
        with torch.cuda.graph(graph):  # a pool of its own: nothing shared with another run
            outs.extend(self._pass(start, stop))
        graphs.append(graph)
    torch.cuda.synchronize()
    self.graphs, self.outputs, self.plan = graphs, outs, None
    return method


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
    current.wait_stream(side)
    return None


_put(_timer, "prepare", _split_prepare)
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
