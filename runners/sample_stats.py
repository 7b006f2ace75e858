"""The workers' samples as the judge reads them: a side's spread (interquartile range over the median) and the
screening's early stop (``decided``). Pure arithmetic on microseconds; the sampling is runners/judge_clock.py."""
from __future__ import annotations

import statistics


def decided(samples_b: list[float], samples_c: list[float], margin: float) -> bool:
    """Screening's early stop: the two sides' interquartile ranges do not overlap and their medians are at least
    ``margin`` from parity. More samples would move the ratio, not the verdict (a clear loss, or a clear win that
    the judge's clock still corroborates); the champion is re-timed in full."""
    if margin <= 0 or len(samples_b) < 4 or len(samples_c) < 4:
        return False
    qb, qc = statistics.quantiles(samples_b, n=4), statistics.quantiles(samples_c, n=4)
    apart = qc[2] < qb[0] or qb[2] < qc[0]
    return apart and abs(statistics.median(samples_b) / statistics.median(samples_c) - 1.0) >= margin


def spread(samples: list[float]) -> float:
    if len(samples) < 4:
        return float("inf")
    q = statistics.quantiles(samples, n=4)
    med = statistics.median(samples)
    return (q[2] - q[0]) / med if med else float("inf")
