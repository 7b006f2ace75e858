"""The machine's interrupts while each side is timed. A stopped candidate's timers still fire, each expiry an interrupt
charged to whatever runs on that core: the oracle (tests/test_judge_attacks_round23.py). The judge counts what the
candidate holds (runners/armed.py), but timers can be held where no listing shows them (timerfds in flight in a socket's
queue, io_uring's own), so it also counts the machine's interrupts over each side's timed request (``/proc/stat``'s
``intr`` total, which holds the local timer's), and where the oracle's rounds saw markedly more than the candidate's
own (whose allowance the candidate can raise only so far), its clock has not resolved the size: no speedup is credited
there (``storm``)."""
from __future__ import annotations

import statistics
import time

from .corroboration import counted

FLOOR_PER_MS = 5.0  # the scheduler's tick on a few busy cores and a device's: what any round sees
RATIO = 2.0
# how far the candidate's own rounds may raise the oracle's allowance: they are its to make noisy, on a core where its
# work is not (a helper sleeping 1 us at a time on the idle core while its window was timed, about 38 a ms, let a flood
# of 38-45 a ms through the oracle's rounds: a forged 2.5x credited 2.27-2.56x, round 24). So the allowance is at most
# FLOOR + RATIO x this (15 a ms): a machine busier than that while the baseline is timed credits no speedup (the
# H200 took 1.5-3.3 a ms in every round, twentieth session)
CANDIDATE_CAP_PER_MS = FLOOR_PER_MS


def total() -> int:
    """Interrupts on every core since boot (-1 where /proc/stat does not say)."""
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"intr "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return -1


def per_ms(before: int, after: int, wall_us: float) -> float | None:
    if before < 0 or after < before or wall_us <= 0:
        return None
    return (after - before) / (wall_us / 1000.0)


def ambient(seconds: float = 0.03) -> float | None:
    """The machine's interrupts a ms over ``seconds`` of the caller's sleep: taken by the evaluator before it starts
    any candidate's process, a rate no candidate has had a hand in."""
    before, t0 = total(), time.perf_counter()
    time.sleep(seconds)
    return per_ms(before, total(), (time.perf_counter() - t0) * 1e6)


class Ambient:
    """The machine's own rate as an evaluator keeps it: the least of every sample it has taken (``sample``: at its
    start, then before each candidate), so that whatever ran during one sample (another job's helper sleeping 1 us at
    a time read 41 a ms against 0.03-0.53 idle, round 26) lifts it only until a quieter one is taken."""

    def __init__(self) -> None:
        self.rate: float | None = None

    def note(self, rate: float | None) -> float | None:
        if rate is not None:
            self.rate = rate if self.rate is None else min(self.rate, rate)
        return self.rate

    def sample(self, seconds: float = 0.01) -> float | None:
        return self.note(ambient(seconds))


def storm(rates_b: list, rates_c: list, ambient_rate: float | None = None) -> str:
    """Why the oracle's rounds cannot be trusted for a speedup ('' when they can): their interrupts per ms (the first
    round left out where there are three or more, as the clock does) against the candidate's, counted up to
    ``CANDIDATE_CAP_PER_MS`` or up to the machine's own rate before any candidate ran (``ambient_rate``), whichever is
    more (a host busy alike for both sides, 20 a ms, is no storm: round 25)."""
    b = [r for r in counted(rates_b) if r is not None]
    c = [r for r in counted(rates_c) if r is not None]
    if not b or not c:
        return ""
    mb, mc = statistics.median(b), statistics.median(c)
    if mb > FLOOR_PER_MS + RATIO * min(mc, max(CANDIDATE_CAP_PER_MS, ambient_rate or 0.0)):
        return (f"the machine took {mb:.1f} interrupts a ms while the baseline was timed, {mc:.1f} while the candidate "
                f"was: timers firing for a stopped process slow what runs beside them")
    return ""
