"""The other side stopped while one side is timed: the oracle's times are taken with the candidate's processes
stopped (and, for the judge's clock, held stopped and checked after), the bystanders (the warm spare) stopped while
either side is timed. ``Alone`` is a part of ``runners.judge.Judge`` (through ``runners.judge_clock.TimingSteps``)."""
from __future__ import annotations

import contextlib

from .armed import could_slow
from .protocol import Refusal
from .stopped import ran_since


class Alone:
    """Uses the judge's ``oracle``, ``candidate`` and ``bystanders``."""

    @contextlib.contextmanager
    def _alone(self, worker, settled: bool = False):
        """The oracle's times are taken with the candidate's processes stopped, so that a candidate cannot slow
        the baseline down (a thread keeping the GPU busy while its own worker waits) and look faster for it.
        The bystanders (the warm spare: importing the next candidate's host modules, runners/preload.py, or with
        the next candidate loaded and compiling its kernels, runners/warm.py) are stopped while either side is
        timed: left running during the candidate's samples, a hostile next candidate sank the current one's
        verdict and an honest one's compiles biased it (tests/test_review_pipeline.py). The prefetch overlaps
        the correctness trials, the profile and the reveals instead."""
        quiet = [w for w in self.bystanders if w is not worker]
        if worker is self.oracle:
            quiet.append(self.candidate)
        for w in quiet:
            w.pause()
        try:
            # and, for the judge's clock (``settled``), stopped, every thread: one inside a long system call runs on
            # after SIGSTOP (round 21). The samples go without the wait (a scan of /proc, a few ms a pause): what a
            # disturbed sample inflates is the claim, which the clock then holds to what it saw
            held = {}
            for w in quiet if settled else []:
                left = w.still_running()
                if left and w is self.candidate:
                    raise Refusal("timing", f"the candidate's processes did not stop while the judge timed the "
                                            f"baseline ({len(left)} thread(s) still running, e.g. {left[0]}): a "
                                            f"process inside a long system call runs on when stopped")
                if left:  # a bystander (the next candidate's spare) that will not stop is ended, not waited for
                    w.kill()
                    continue
                held[w] = w.cpu_times()
                armed = could_slow(held[w])  # timers the kernel fires through the oracle's round (round 23)
                if armed and w is self.candidate:
                    raise Refusal("timing", f"the candidate could slow the baseline while it is stopped: {armed}")
                if armed:
                    w.kill()
                    del held[w]
            yield
            # ... and stayed stopped: no thread put on a CPU again, born or ended meanwhile (a process woken by its
            # own timer's SIGCONT, helpers forking past the scans: round 22)
            for w, before in held.items():
                ran = ran_since(before, w.cpu_times())
                if ran and w is self.candidate:
                    raise Refusal("timing", f"the candidate's processes ran while the judge timed the other side "
                                            f"({'; '.join(ran)} while stopped): a stopped process was continued")
                if ran:
                    w.kill()
        finally:
            for w in quiet:
                w.resume()
