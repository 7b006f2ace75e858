"""Device timing inside a worker, over rotating input/output sets ("slots").

One CUDA graph captures one call per slot, each slot with its own input tensors (and its own outputs, kept
in the graph's pool). A sample is the device time of ``replays`` back-to-back replays, read with CUDA
events, divided by the calls made. Host-side Python of the wrapper cannot leak into graph replay (event
timing around a Python call reported fake 10-20x "speedups" at decode shapes on the H200); a wrapper that
cannot be captured (it synchronises) falls back to events around direct calls, and says so.

These numbers are the worker's claims. The judge corroborates them with its own clock over a replay on
fresh values (``window``), whose outputs it then checks slot by slot (runners/judge.py).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from .compare import flatten


def commitments(outputs: list) -> list[int]:
    """One integer per slot: the sum of the bytes of the slot's outputs, computed on the device in a few
    batched kernels (a multi-tensor copy into one block, then one reduction; no launch per slot). A worker
    that returns these before showing any output has committed to outputs it must already have computed; the
    judge recomputes them from the outputs it is shown."""
    return CommitPlan(outputs).sums()


class CommitPlan:
    """``commitments`` for one list of outputs, planned once and reusable. A graph's outputs are the same tensors on
    every replay, so the work per pass is a few batched device calls and no Python per slot: host time inside
    the judge's clock is what it cannot tell from device time, and with thousands of slots a per-slot loop
    was milliseconds of it (and of its noise)."""

    def __init__(self, outputs: list):
        flats = [flatten(out) for out in outputs]
        self.count = len(flats)
        self.device = next((t.device for f in flats for t in f if isinstance(t, torch.Tensor)), torch.device("cpu"))
        self.groups: list[tuple] = []  # (block, views of its rows, the outputs' flat views): one copy, one sum
        self.odd: list[list] = []  # output positions that cannot be batched (shapes differ, not contiguous)
        for column in zip(*flats):
            tensors = [t.detach() for t in column if isinstance(t, torch.Tensor)]
            if len(tensors) != len(flats) or not tensors[0].numel():
                continue
            first = tensors[0]
            if any(t.shape != first.shape or t.dtype != first.dtype or not t.is_contiguous() for t in tensors):
                self.odd.append(tensors)
                continue
            block = torch.empty((len(tensors), first.numel()), dtype=first.dtype, device=self.device)
            self.groups.append((block, list(block.unbind(0)), [t.reshape(-1) for t in tensors]))

    def sums(self) -> list[int]:
        total = torch.zeros(self.count, dtype=torch.int64, device=self.device)
        for block, dst, src in self.groups:
            torch._foreach_copy_(dst, src)
            total += block.view(torch.uint8).sum(dim=1, dtype=torch.int64)
        for tensors in self.odd:
            for k, t in enumerate(tensors):
                total[k] += torch.sum(t.contiguous().reshape(-1).view(torch.uint8), dtype=torch.int64)
        return [int(x) for x in total.tolist()]


def matches(committed: float, recomputed: float) -> bool:
    if isinstance(committed, int) and isinstance(recomputed, int):
        return committed == recomputed
    if math.isnan(committed) or math.isnan(recomputed):  # NaN outputs: both must be NaN
        return math.isnan(committed) and math.isnan(recomputed)
    if math.isinf(committed) or math.isinf(recomputed):
        return committed == recomputed
    return abs(committed - recomputed) <= 1e-4 * max(abs(committed), abs(recomputed)) + 1e-6


class SlotTimer:
    """Times ``fn`` over ``slots`` (keyword-argument dicts already on the device)."""

    def __init__(self, fn: Callable, slots: list[dict]):
        self.fn = fn
        self.slots = slots
        self.outputs: list = [None] * len(slots)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.method = "cuda-graph"
        self.plan: CommitPlan | None = None  # for the graph's outputs, which never change

    def prepare(self) -> str:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        # Warm-up on a side stream, as capture requires: the first calls compile, autotune and allocate; every
        # slot has the same shapes, so two calls do what a call per slot did (8192 of them cost ~0.3 s).
        with torch.cuda.stream(stream):
            for k, kwargs in enumerate(self.slots[:2]):
                self.outputs[k] = self.fn(**kwargs)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                outs = [self.fn(**kwargs) for kwargs in self.slots]
            self.outputs = outs
            self.graph = graph
        except Exception:  # noqa: BLE001 - any capture failure means: time direct calls with events
            torch.cuda.synchronize()
            self.graph, self.method = None, "cuda-events"
        torch.cuda.synchronize()
        return self.method

    def run(self, replays: int = 1) -> None:
        for _ in range(replays):
            if self.graph is not None:
                self.graph.replay()
            else:
                for k, kwargs in enumerate(self.slots):
                    self.outputs[k] = self.fn(**kwargs)

    def sample_us(self, replays: int) -> float:
        """Device microseconds per call over ``replays`` replays of every slot."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        self.run(replays)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / (replays * len(self.slots))

    def window(self, lead_cycles: int = 0, fill: Callable[[], None] | None = None) -> tuple[float, list[int], dict]:
        """The judge's corroboration run: the slots filled with the values of the seed that came with the
        request, one pass over every slot (all distinct values), then the slots' commitments. Returns the
        pass's device time, the commitments, and the device time of the lead, the fill and the commitments, by
        this process's events (trusted from the oracle only). The judge times the whole request with its own
        clock. ``lead_cycles`` of device sleep go first, so that the whole request is queued before the device
        starts on it (no host gaps inside the pass)."""
        events = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
        events[0].record()
        if lead_cycles and self.graph is not None:
            torch.cuda._sleep(int(lead_cycles))
        events[1].record()
        if fill is not None:
            fill()
        events[2].record()
        self.run(1)
        events[3].record()
        if self.graph is not None:
            if self.plan is None:
                self.plan = CommitPlan(self.outputs)
            sums = self.plan.sums()
        else:  # direct calls: new output tensors every pass
            sums = commitments(self.outputs)
        events[4].record()
        events[4].synchronize()
        parts = {"lead_us": events[0].elapsed_time(events[1]) * 1000.0,
                 "fill_us": events[1].elapsed_time(events[2]) * 1000.0,
                 "commit_us": events[3].elapsed_time(events[4]) * 1000.0}
        return events[2].elapsed_time(events[3]) * 1000.0, sums, parts


def host_overhead_us(fn: Callable[[], object], calls: int = 30) -> float:
    """Host time per call of the Python wrapper (launch cost), measured without waiting for the device."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / calls


def copy_bandwidth_gbs(nbytes: int = 1 << 30) -> float:
    """Measured device-to-device copy bandwidth (bytes read + written per second), the plausibility ceiling."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return nbytes / (times[len(times) // 2] * 1e-3) / 1e9


def device_kernels(fn: Callable[[], object]) -> list[tuple[str, float]]:
    """(kernel name, device microseconds) of the kernels one call ran, from the profiler."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for evt in prof.key_averages():
        us = getattr(evt, "device_time_total", None)
        if us is None:
            us = getattr(evt, "cuda_time_total", 0.0)
        if us:
            out.append((evt.key, float(us)))
    return out
