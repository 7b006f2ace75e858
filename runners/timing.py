"""Device timing of kernel launches, as a serving engine sees them.

The default is CUDA-graph replay: the launches of one call are captured once and replayed, so the host-side
Python of the wrapper cannot leak into the device time (event timing around a Python call reported fake
10-20x "speedups" at decode shapes on the H200). When a wrapper cannot be captured (it synchronises), the
timer falls back to CUDA events around the calls and says so. Host overhead is measured on its own.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass
class Timing:
    median_us: float
    spread: float  # interquartile range / median
    method: str  # cuda-graph | cuda-events
    samples: int
    run: Callable[[], None]  # one more sample: a graph replay, or one direct call
    holder: list  # holder[0]: the outputs of the last timed call

    @property
    def outputs(self):
        return self.holder[0]


def _events_ms(run: Callable[[], None]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def graph_runner(fn: Callable[[], object], calls: int, last_out: list) -> Callable[[], None] | None:
    """A replay of ``calls`` back-to-back calls of ``fn`` captured in one CUDA graph, or None if uncapturable.

    ``last_out`` receives the outputs of the last captured call: they hold what the replays computed, so the
    timed work itself can be checked against the oracle afterwards.
    """
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on a side stream, as capture requires
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(calls):
                out = fn()
        last_out[:] = [out]
    except Exception:  # noqa: BLE001 - any capture failure means: time with events instead
        torch.cuda.synchronize()
        return None
    torch.cuda.synchronize()
    return graph.replay


def calls_per_sample(fn: Callable[[], object], target_us: float = 1000.0, max_calls: int = 500) -> int:
    """How many calls make one sample last about ``target_us`` of device time (amortises launch gaps)."""
    fn()
    torch.cuda.synchronize()
    per_call_us = _events_ms(lambda: [fn() for _ in range(5)]) * 1000 / 5
    return max(1, min(max_calls, int(target_us / max(per_call_us, 0.5))))


def host_overhead_us(fn: Callable[[], object], calls: int = 50) -> float:
    """Host time per call of the Python wrapper (launch cost), measured without waiting for the device."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / calls


def _stats(samples: list[float]) -> tuple[float, float]:
    med = statistics.median(samples)
    if len(samples) < 4:
        return med, 0.0
    q = statistics.quantiles(samples, n=4)
    return med, (q[2] - q[0]) / med if med else 0.0


def time_interleaved(fns: list[Callable[[], object]], refill: Callable[[int], None], min_rounds: int = 10,
                     max_rounds: int = 60, target_spread: float = 0.02) -> list[Timing]:
    """Median device time per call of each function, sampled in alternating order until the spread is
    ``target_spread`` or less (at most ``max_rounds`` rounds; the spread is reported either way).

    Interleaving puts baseline and candidate under the same clocks and thermal state. A graph replays the
    launches fixed at capture, so Python-side caching cannot react to repeated calls; a function that cannot
    be captured is called once per sample instead, after ``refill(sample)`` has written new values into its
    inputs, so that remembering earlier calls does not pay.
    """
    calls = calls_per_sample(fns[0])
    timings = []
    for fn in fns:
        holder: list = [None]
        replay = graph_runner(fn, calls, holder)
        if replay is None:
            def run_direct(fn=fn, holder=holder):
                holder[0] = fn()
            timings.append(Timing(0.0, 0.0, "cuda-events", 0, run_direct, holder))
        else:
            timings.append(Timing(0.0, 0.0, "cuda-graph", 0, replay, holder))
    per_sample = [calls if t.method == "cuda-graph" else 1 for t in timings]
    for t in timings:  # warm-up: caches, clocks, first-replay upload
        for _ in range(3):
            _events_ms(t.run)
    samples: list[list[float]] = [[] for _ in fns]
    for round_ in range(max_rounds):
        order = range(len(fns)) if round_ % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            if timings[i].method == "cuda-events":
                refill(round_)
            samples[i].append(_events_ms(timings[i].run) * 1000 / per_sample[i])
        if round_ + 1 >= min_rounds and all(_stats(s)[1] <= target_spread for s in samples):
            break
    torch.cuda.synchronize()
    for t, s in zip(timings, samples):
        t.median_us, t.spread = _stats(s)
        t.samples = len(s)
    return timings


def copy_bandwidth_gbs(nbytes: int = 1 << 30) -> float:
    """Measured device-to-device copy bandwidth (bytes read + written per second), the plausibility ceiling."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)

    def copy() -> None:
        dst.copy_(src)

    copy()
    ms = statistics.median([_events_ms(copy) for _ in range(10)])
    return nbytes / (ms * 1e-3) / 1e9
