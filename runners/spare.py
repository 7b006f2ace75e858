"""The warm spare and the prefetch: the next candidate's worker started before it is needed, and, during a search,
the next candidate loaded into it and its kernels compiled while the evaluation in progress is judged (runners/warm.py),
so that its own evaluation starts compiled. A part of ``Evaluator`` (runners/sandbox.py), which owns the workers, the
lock and the spawner these methods use."""
from __future__ import annotations

import dataclasses
import time
from concurrent.futures import Future

from .policy import check_source
from .processes import START_TIMEOUT, WorkerProcess


@dataclasses.dataclass
class Prefetch:
    """The warm spare with the next candidate loaded into it and its kernels compiling (``Evaluator.prefetch``)."""
    source: str
    worker: WorkerProcess
    done: Future  # -> (the load's reply, the warm-up's reply or None, seconds)


class SpareWorkers:
    """The spare and the prefetch of an ``Evaluator`` (its ``_lock``, ``_spare``, ``_prefetch``, ``_wanted``,
    ``_screening``, ``_warmer``, ``_spawn``, ``_load`` and ``_check_isolation``)."""

    def _take_candidate(self, source: str, screening: bool) -> tuple[WorkerProcess, Future | None]:
        """The worker for ``source``: the spare, or the prefetched spare if it holds this source (with the future of
        its load and warm-up); a spare prefetched for another source is ended, and so is a dead one. Then the new
        spare is started and, for a search's screening (``screening``), given the source the search wants next, if
        it said so (``prefetch``). Any other evaluation (the champion's verification, its held-out cases) drops
        what the search left: no candidate that was never judged runs beside it."""
        with self._lock:
            ahead, self._prefetch = self._prefetch, None
            if self._wanted == source or not screening:
                self._wanted = None
            if ahead is not None and (ahead.source != source or not screening):
                ahead.worker.close()
                self._spare, ahead = None, None
            if self._spare is not None and not self._spare.alive():
                self._spare.close()  # its pipes, log and folder (and what it wrote there) go with it
                self._spare = None
            worker = self._spare or self._spawn("candidate")
            if self.isolation.active and not self._isolation_checked:
                worker = self._check_isolation(worker)
            self._spare = self._spawn("candidate") if self._use_spare else None
            self._screening = screening
            self._start_prefetch()
        return worker, (ahead.done if ahead is not None and ahead.worker is worker else None)

    def cancel_prefetch(self) -> None:
        """The search is over: the source it noted is dropped and the one loading is ended."""
        with self._lock:
            ahead, self._prefetch, self._wanted = self._prefetch, None, None
            if ahead is not None:
                ahead.worker.close()
                if self._spare is ahead.worker:
                    self._spare = None

    def prefetch(self, source: str) -> bool:
        """The search's next candidate: loaded into the warm spare, and its kernels compiled at the cases' shapes
        (runners/warm.py), while the evaluation in progress is judged, so that its own evaluation starts compiled.
        Called while no evaluation holds its worker (one submitted and not yet started, say), or while the spare
        holds another prefetched source (the evaluation just submitted), it waits for the next evaluation to take its
        worker and start the new spare. Only the search's cases are sent (never the
        held-out ones). A speed-up only: ``evaluate`` of another source ends the prefetched worker. Returns
        whether ``source`` is (or will be) prefetched: one loading and one noted at a time."""
        with self._lock:
            if source in (self._wanted, self._prefetch.source if self._prefetch else None):
                return True
            if self._wanted is not None or not self._use_spare or check_source(source, self.baseline, self.spec.entry):
                return False
            # noted; started now if an evaluation holds its worker and the spare is free, else when the next one takes
            # its worker (the one prefetched before may be the very evaluation just submitted)
            self._wanted = source
            if self._screening and self._prefetch is None:
                self._start_prefetch()
            return True

    def _start_prefetch(self) -> None:
        """(Under the lock.) The wanted source into the spare, in the background."""
        source, spare = self._wanted, self._spare
        if source is None or spare is None or not spare.alive() or (self.isolation.active
                                                                   and not self._isolation_checked):
            return
        self._wanted = None
        self._prefetch = Prefetch(source, spare, self._warmer.submit(self._load_and_warm, spare, source))

    def _load_and_warm(self, worker: WorkerProcess, source: str) -> tuple[dict, dict | None, float]:
        t0 = time.perf_counter()
        worker.deadline = time.monotonic() + self.timeout + START_TIMEOUT  # it may be paused meanwhile
        info = self._load(worker, "ks_candidate", source)
        warm = None
        if info.get("ok") and self.backend.timed:
            warm = worker.request("warm", args=[dataclasses.asdict(a) for a in self.spec.args],
                                  cases=[dataclasses.asdict(c) for c in self.spec.cases])
        worker.deadline = None
        return info, warm, time.perf_counter() - t0
