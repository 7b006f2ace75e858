"""Device timing inside a worker, over rotating input/output sets ("slots").

CUDA graphs capture one call per slot, each slot with its own input tensors (and its own outputs, kept in the
graphs' shared pool), ``GRAPH_SLOTS`` calls a graph, replayed in slot order. A sample is the device time of
``replays`` back-to-back replays of them all, read with CUDA events, divided by the calls made. Host-side Python of
the wrapper cannot leak into graph replay (event timing around a Python call reported fake 10-20x "speedups" at
decode shapes on the H200); a wrapper that cannot be captured (it synchronises) falls back to events around direct
calls, and says so.

These numbers are the worker's claims. The judge corroborates them with its own clock over a replay on
fresh values (``window``), whose outputs it then checks slot by slot (runners/judge.py).
"""
from __future__ import annotations

import time
from collections.abc import Callable

import torch

from .checkpoints import Checkpoints
from .commitments import CommitPlan, digest


# Slots a graph: a pass is captured as graphs of this many calls, replayed one after the other. A graph's launch is
# host work in proportion to its nodes, done before the device starts on any of them: on the H200 one graph of 8192
# RMSNorm calls at T=1 took 3-6 ms of the host to launch, inside the timed pass and the judge's clock alike (the pass
# less that launch was 17.1 ms in every round; bench/clock_gap_gpu.py, session 24), and the host's pace in each
# process made the two sides' passes differ by up to 7 %. In runs of 256 the device starts on the first while the
# host launches the next (a launch of 256 calls well within their device time).
GRAPH_SLOTS = 256


def retire_first_graph() -> None:
    """Capture, replay and destroy one tiny CUDA graph, so that no timed graph is the process's first.

    On the H200 (driver 580, torch 2.11) the first CUDA graph a process makes replays RMSNorm's T=1 calls at 1.44 us
    each, and every graph made after it (the first one included, from then on) at 1.62 us: 12 % apart, for the
    process's whole life, whatever the later graph holds (bench/placement_gpu.py HOLD=2; session 22). A worker whose
    samples came from the process's first graph was faster than its twin, the bimodal offset of part (a).
    ``SlotTimer.prepare`` calls this right before each timed capture, so both sides and the judge's window time graphs
    of one kind, whatever the module did before (its own graphs at import, or a reset of its CUDA context, after which
    a first graph might be the context's: round 32), and a candidate cannot make a timed graph a first one."""
    graph, x = tiny_graph()
    torch.cuda.synchronize()
    del graph, x


def tiny_graph() -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """A CUDA graph of one small add (warmed up on a side stream, captured, replayed once) and its tensor."""
    x = torch.zeros(16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x.add_(1)
    graph.replay()
    return graph, x


def _warm_up_slots(slots: list[dict]) -> list[int]:
    """The first two slots, and the first slot of every other set of scalar (non-tensor) argument values."""
    picked, seen = list(range(min(2, len(slots)))), set()
    for k, kwargs in enumerate(slots):
        values = repr(sorted((n, v) for n, v in kwargs.items() if not isinstance(v, torch.Tensor)))
        if values not in seen:
            seen.add(values)
            if k not in picked:
                picked.append(k)
    return picked


class SlotTimer:
    """Times ``fn`` over ``slots`` (keyword-argument dicts already on the device)."""

    def __init__(self, fn: Callable, slots: list[dict], checks: Checkpoints | None = None):
        self.fn = fn
        self.slots = slots
        self.checks = checks  # the judge's window: checkpoints between calls (runners/checkpoints.py)
        self.outputs: list = [None] * len(slots)
        self.graphs: list[torch.cuda.CUDAGraph] = []  # one a run of GRAPH_SLOTS slots, replayed in order
        self.method = "cuda-graph"
        self.plan: CommitPlan | None = None  # for the graphs' outputs, which never change
        self.committed: torch.Tensor | None = None  # the last window's per-slot commitments (on the device)
        self.commit_plan: CommitPlan | None = None  # the plan that made them (its rows, runners/openings.py)

    def prepare(self) -> str:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        # Warm-up on a side stream, as capture requires: the first calls compile, autotune and allocate; every
        # slot has the same shapes, so two calls do what a call per slot did (8192 of them cost ~0.3 s), and one
        # more for each other set of scalar values (a range scalar takes a few values across its range,
        # runners/inputs.py SlotBank: an integer one may compile another specialisation or autotune again, which
        # must not happen inside the capture)
        with torch.cuda.stream(stream):
            for k in _warm_up_slots(self.slots):
                self.outputs[k] = self.fn(**self.slots[k])
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        retire_first_graph()  # no timed graph is a process's (or a context's) first
        graphs, outs = [], []
        try:
            for start in range(0, len(self.slots), GRAPH_SLOTS):  # one memory pool for all, their outputs in it
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=graphs[0].pool() if graphs else None):
                    outs.extend(self._pass(start, start + GRAPH_SLOTS))
                graphs.append(graph)
            self.outputs, self.graphs = outs, graphs
            if self.checks is not None:
                self.checks.capture_alone(outs)
        except Exception:  # noqa: BLE001 - any capture failure means: time direct calls with events
            torch.cuda.synchronize()
            self.graphs, self.method = [], "cuda-events"
            if self.checks is not None:  # buffers made inside the failed capture were never zeroed: made anew
                self.checks.buffers.clear()
        torch.cuda.synchronize()
        return self.method

    @property
    def graph(self) -> torch.cuda.CUDAGraph | None:
        """The first of the pass's graphs (None: no capture, direct calls timed with events)."""
        return self.graphs[0] if self.graphs else None

    def _pass(self, start: int = 0, stop: int | None = None) -> list:
        """One call per slot (of ``start:stop``), in slot order, with the judge's checkpoints after the calls it
        drew."""
        outs, stop = [], len(self.slots) if stop is None else min(stop, len(self.slots))
        for k in range(start, stop):
            outs.append(self.fn(**self.slots[k]))
            if self.checks is not None:
                self.checks.after(k, outs[-1])
        return outs

    def run(self, replays: int = 1) -> None:
        for _ in range(replays):
            if self.graphs:
                for graph in self.graphs:
                    graph.replay()
            else:
                self.outputs = self._pass()

    def sample_us(self, replays: int, lead_cycles: int = 0) -> float:
        """Device microseconds per call over ``replays`` replays of every slot. ``lead_cycles`` of device sleep go
        before the start event, so that the host has queued the first replays when the device reaches it: without
        it the host's launch of the first replay sat inside every sample, and a process with slower host calls (the
        candidate's, under its audit hook) read about 1 % slower at decode sizes on the H200 (session 11)."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if lead_cycles:
            torch.cuda._sleep(int(lead_cycles))
        start.record()
        self.run(replays)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / (replays * len(self.slots))

    def commit(self, key: int) -> int:
        """Commit to the slots' current outputs: their hashes stay on the device (``committed``, shown to the judge
        after its clock, ``reveal``) and one digest of them is returned, the only number the timed reply carries.
        A graph's outputs never change, so its plan is made once; direct calls make new outputs every pass."""
        if self.graph is not None:
            if self.plan is None:
                self.plan = CommitPlan(self.outputs, capture=True)
            plan = self.plan
        else:
            plan = CommitPlan(self.outputs)
        self.committed = plan.hashes(key)
        self.commit_plan = plan  # its chunk-level nodes and each output's hash, for the openings (``reveal``)
        traces = self.checks.traces() if self.checks is not None else []
        return digest(self.committed, key, [row[3] for row in plan.rows], traces)

    def window(self, lead_cycles: int = 0, fill: Callable[[], None] | None = None,
               key: int = 0) -> tuple[float, int, dict]:
        """The judge's corroboration run: the slots filled with the values of the seed that came with the
        request, one pass over every slot (all distinct values), then the commitment (``commit``, with the
        request's ``key``). Returns the pass's device time, the commitment, and the device time of the lead, the
        fill and the commitment, by this process's events (trusted from the oracle only). The judge times the whole
        request with its own clock: nothing in it does host work per slot. ``lead_cycles`` of device sleep go first,
        so that the device starts once the host has queued the fill's first kernels; the pass's graphs are launched
        one after another while the device runs the ones before (``GRAPH_SLOTS``)."""
        events = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
        started = time.perf_counter()  # the request's host time, lead to commitment (``host_us``: where the clock's
        # noise lies, fourteenth session: the oracle's device parts moved by 0.03 ms, its walls by up to 1.5 ms)
        events[0].record()
        if lead_cycles and self.graph is not None:
            torch.cuda._sleep(int(lead_cycles))
        events[1].record()
        queued = time.perf_counter()
        if fill is not None:
            fill()
        queued = time.perf_counter() - queued  # the host's time to queue the fill (the device waits on it past the lead)
        events[2].record()
        replayed = time.perf_counter()
        self.run(1)
        replayed = time.perf_counter() - replayed  # the host's time to launch the pass's graphs
        events[3].record()
        root = self.commit(key)
        events[4].record()
        events[4].synchronize()
        parts = {"lead_us": events[0].elapsed_time(events[1]) * 1000.0,
                 "fill_us": events[1].elapsed_time(events[2]) * 1000.0,
                 "commit_us": events[3].elapsed_time(events[4]) * 1000.0,
                 "host_us": (time.perf_counter() - started) * 1e6, "queue_us": queued * 1e6,
                 "replay_us": replayed * 1e6}
        return events[2].elapsed_time(events[3]) * 1000.0, root, parts


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


def device_kernels(fn: Callable[[], object], around=None) -> tuple[list[tuple[str, float]], list | None]:
    """(kernel name, device microseconds) of the kernels one call ran, from the profiler, summed by name; and the
    same call's device events one by one in the order they started (None where the profiler's events cannot be read
    so), which runners/kernel_share.py matches to the call's launches where two kernels share a name. ``around``: a
    context manager around the profiled call alone (the launch recorder)."""
    from contextlib import nullcontext

    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with around if around is not None else nullcontext():
            fn()
        torch.cuda.synchronize()
    out = []
    for evt in prof.key_averages():
        us = getattr(evt, "device_time_total", None)
        if us is None:
            us = getattr(evt, "cuda_time_total", 0.0)
        if us:
            out.append((evt.key, float(us)))
    return out, _device_sequence(prof)


def _device_sequence(prof) -> list | None:
    try:
        from torch.autograd import DeviceType

        events = [e for e in prof.events() if e.device_type != DeviceType.CPU]
        events.sort(key=lambda e: e.time_range.start)
        # each with its link to the launch call that made it: a device event's id is the profiler's correlation id of
        # that call (CUPTI's, which grows call by call, runtime and driver calls alike; ``linked_correlation_id`` is
        # the torch op around the call, 0 for a Triton launch outside one: the H200, 2026-12-03). 0 where the profiler
        # gives none. runners/kernel_share.py matches by it, since on two streams start order is not launch order (a
        # token kernel queued behind a device sleep took its namesake's time, round 24's D)
        return [(e.name, float(e.time_range.elapsed_us()), max(int(getattr(e, "id", 0) or 0), 0)) for e in events]
    except Exception:  # noqa: BLE001 - another torch's profiler: the sums stand alone
        return None
