"""The asynchronous search loop: several proposals in flight while the devices evaluate, one evaluation per
device at a time; duplicates refused before any evaluation; every step written to the run store.

Proposals run in threads (an LLM call is mostly waiting). Each proposal gets its own random generator seeded
from the search's, so the search's random state is one number sequence that the store saves and a resume
restores. The archive is only changed here, in the loop's thread.
"""
from __future__ import annotations

import collections
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field

from runners.results import Evaluation

from .archive import Archive
from .budget import Budget, Counters, stop_reason
from .candidate import Candidate
from .operators import Operator

log = logging.getLogger("kernelsmith")
MAX_DUPLICATE_STREAK = 50  # the operators' space is exhausted after this many duplicates in a row


@dataclass
class SearchSummary:
    evaluated: int
    failures: int
    duplicates_rejected: int
    exhausted: bool
    stop: str = ""
    rejected_proposals: int = 0
    usage: list = field(default_factory=list)


@dataclass
class SearchConfig:
    budget: Budget
    in_flight: int = 3  # candidates between proposal and verdict at once (1: strictly sequential)
    round_size: int = 1
    max_duplicate_streak: int = MAX_DUPLICATE_STREAK
    max_rejected_streak: int = 20  # proposals in a row that never reached the evaluator (LLM down)
    weights: dict[str, float] = field(default_factory=dict)  # operator name -> share of proposals


def won(child: Candidate, parent: Candidate | None) -> bool:
    """The child stayed correct and beat its parent (untimed: stayed correct)."""
    if parent is None or not child.correct:
        return False
    if parent.parent_id is None:  # the baseline is the oracle: fitness is already relative to it
        return child.fitness is None or child.fitness > 1.0
    if child.fitness is None or parent.fitness is None:
        return child.fitness is None and parent.correct
    return child.fitness > parent.fitness


class Search:
    def __init__(self, archive: Archive, operators: list[Operator], evaluators: list[Callable[[Candidate], Evaluation]],
                 config: SearchConfig, rng: random.Random, store=None, ensemble=None,
                 on_result: Callable[[Candidate], None] = lambda c: None):
        self.archive, self.operators, self.evaluators = archive, list(operators), list(evaluators)
        self.config, self.rng, self.store, self.ensemble, self.on_result = config, rng, store, ensemble, on_result
        self.n = Counters()
        self.pending: collections.deque[Candidate] = collections.deque()
        self.next_id = archive.next_id()
        self.by_id = {c.id: c for c in archive.candidates}
        self.dead: set[str] = set()  # operators that have nothing more to propose

    # -- state ------------------------------------------------------------------------------------------------
    def state(self) -> dict:
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss], "counters": asdict(self.n), "next_id": self.next_id,
                "bandit": self.ensemble.state() if self.ensemble else None,
                "dead_operators": sorted(self.dead)}

    def restore(self, state: dict, pending: list[Candidate]) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.n = Counters(**state["counters"])
        self.next_id = max(state["next_id"], self.archive.next_id())
        self.dead = set(state.get("dead_operators", ()))
        if self.ensemble and state.get("bandit"):
            self.ensemble.restore(state["bandit"])
        for c in pending:
            self.archive.remember(c.source)
            self.pending.append(c)

    # -- the loop ---------------------------------------------------------------------------------------------
    def _pick_operator(self) -> Operator:
        live = [op for op in self.operators if op.name not in self.dead]
        if len(live) == 1:
            return live[0]
        weights = [self.config.weights.get(op.name, 1.0) for op in live]
        return self.rng.choices(live, weights=weights, k=1)[0]

    def _usage(self) -> tuple[int, float]:
        if not self.ensemble:
            return 0, 0.0
        total = self.ensemble.total()
        return total.tokens, total.cost

    def _record(self, cand: Candidate, status: str) -> None:
        if self.store:
            self.store.add_candidate(cand, status, self.state())

    def _on_proposal(self, op: Operator, cand: Candidate | None, streaks: dict) -> None:
        if cand is None:
            self.dead.add(op.name)
            log.info("operator %s has nothing more to propose", op.name)
            return
        cand.id = self.next_id
        self.next_id += 1
        if not getattr(op, "island_aware", False):  # the tuner: stay on the parent's island, else spread out
            parent = self.by_id.get(cand.parent_id)
            cand.island = parent.island if parent is not None and parent.parent_id is not None else \
                cand.id % len(self.archive.islands)
        if cand.rejected:
            self.n.rejected += 1
            streaks["rejected"] += 1
            log.info("proposal %d (%s) rejected: %s", cand.id, cand.operator, cand.rejected.splitlines()[0][:200])
            self._record(cand, "rejected")
            return
        streaks["rejected"] = 0
        if self.archive.seen(cand.source):
            self.n.duplicates += 1
            streaks["duplicate"] += 1
            self._record(cand, "duplicate")
            return
        streaks["duplicate"] = 0
        self.archive.remember(cand.source)
        self._record(cand, "pending")
        self.pending.append(cand)

    def _on_evaluated(self, cand: Candidate, evaluation: Evaluation) -> None:
        cand.evaluation = evaluation
        before = self.archive.best_correct()
        self.archive.add(cand)
        self.by_id[cand.id] = cand
        self.n.evaluated += 1
        after = self.archive.best_correct()
        improved = after is not before and after is cand and (before is None or before.fitness is None or
                                                               (cand.fitness or 0) > (before.fitness or 0) * 1.001)
        self.n.since_improvement = 0 if improved else self.n.since_improvement + 1
        model = cand.model or cand.genome.get("model")  # (a resumed pending one has no calls)
        if self.ensemble and model:
            self.ensemble.record_outcome(model, won(cand, self.by_id.get(cand.parent_id)))
        if self.store:
            self.store.set_evaluation(cand, self.state())
        self.on_result(cand)

    def _prefetch(self, ahead: dict[int, int], busy: list[int]) -> None:
        """Each busy device whose evaluator can load the next candidate ahead (``prefetch``: its kernels compile
        while the current one is judged, runners/sandbox.py) is given the next pending candidate not yet given."""
        given = set(ahead.values())
        waiting = [c for c in self.pending if c.id not in ahead]
        for slot in busy:
            prefetch = getattr(self.evaluators[slot], "prefetch", None)
            if slot in given or prefetch is None or not waiting:
                continue
            cand = waiting.pop(0)
            try:
                if prefetch(cand):
                    ahead[cand.id] = slot
            except Exception:  # noqa: BLE001 - a speed-up only: the evaluation does it all again
                log.exception("prefetch failed")

    def _next_for(self, slot: int, ahead: dict[int, int], free: list[int]) -> Candidate:
        """The pending candidate a free device evaluates next: the one it loaded ahead, else the first not loaded
        ahead by a device still busy (that one arrives compiled there), else the first waiting."""
        order = list(self.pending)
        mine = [c for c in order if ahead.get(c.id) == slot]
        unclaimed = [c for c in order if ahead.get(c.id, slot) == slot or ahead[c.id] in free]
        cand = (mine or unclaimed or order)[0]
        self.pending.remove(cand)
        ahead.pop(cand.id, None)
        return cand

    def run(self) -> SearchSummary:
        cfg = self.config
        pool = ThreadPoolExecutor(max_workers=cfg.in_flight + len(self.evaluators), thread_name_prefix="search")
        proposing: dict[Future, Operator] = {}
        evaluating: dict[Future, tuple[Candidate, int]] = {}
        free_devices = list(range(len(self.evaluators)))
        ahead: dict[int, int] = {}  # candidate id -> the device that loads it while busy with another
        streaks = {"duplicate": 0, "rejected": 0}
        started = time.monotonic() - self.n.elapsed_s
        stop = ""
        try:
            while True:
                self.n.elapsed_s = time.monotonic() - started
                in_progress = len(proposing) + len(self.pending) + len(evaluating)
                if not stop:
                    tokens, money = self._usage()
                    reason = stop_reason(cfg.budget, self.n, in_progress, cfg.round_size, tokens, money,
                                         self.n.elapsed_s)
                    if streaks["duplicate"] >= cfg.max_duplicate_streak:
                        reason = "exhausted"
                    elif streaks["rejected"] >= cfg.max_rejected_streak:
                        reason = "proposals keep failing"
                    elif all(op.name in self.dead for op in self.operators):
                        reason = "exhausted"
                    if reason is None and in_progress < cfg.in_flight:
                        op = self._pick_operator()
                        # Sequential: the search's own generator. Otherwise one seeded per proposal, so that the
                        # random stream does not depend on which thread finishes first.
                        rng = self.rng if cfg.in_flight == 1 else random.Random(self.rng.getrandbits(64))
                        self.n.proposals += 1
                        proposing[pool.submit(op.propose, self.archive, rng)] = op
                        continue
                    if reason is not None and (reason != "evaluations" or not in_progress):
                        stop = reason
                while self.pending and free_devices:
                    slot = free_devices.pop(0)
                    cand = self._next_for(slot, ahead, free_devices)
                    evaluating[pool.submit(self.evaluators[slot], cand)] = (cand, slot)
                self._prefetch(ahead, [slot for _, slot in evaluating.values()])
                # Past the wall clock, proposals still thinking are abandoned; any other stop lets them finish
                # (their tokens are spent) and evaluates what they bring.
                waiting = [] if stop == "wall-clock" else list(proposing)
                if stop and not evaluating and not self.pending and not waiting:
                    break
                futures = list(evaluating) + waiting
                if not futures:
                    break
                done, _ = wait(futures, timeout=1.0, return_when=FIRST_COMPLETED)
                for fut in done:
                    if fut in proposing:
                        op = proposing.pop(fut)
                        try:
                            cand = fut.result()
                        except Exception as exc:  # an operator bug must not end the run
                            log.exception("operator %s failed", op.name)
                            cand = Candidate(id=-1, source="", operator=op.name, rejected=f"operator error: {exc}")
                        self._on_proposal(op, cand, streaks)
                    else:
                        cand, slot = evaluating.pop(fut)
                        free_devices.append(slot)
                        try:
                            evaluation = fut.result()
                        except Exception as exc:  # noqa: BLE001 - a bug there must not end the run
                            evaluation = Evaluation(stage="crashed", error=f"evaluator error: {exc}")
                        self._on_evaluated(cand, evaluation)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # proposals still thinking are abandoned
        self.n.elapsed_s = time.monotonic() - started
        if self.store:
            self.store.put("state", self.state())
            self.store.put("stop", stop)
        log.info("search stopped: %s", stop)
        return SearchSummary(self.n.evaluated, self.archive.failures, self.n.duplicates,
                             stop == "exhausted", stop, self.n.rejected,
                             self.ensemble.report() if self.ensemble else [])


def evolve(archive: Archive, operator: Operator, evaluate: Callable[[Candidate], Evaluation], budget: int,
           rng: random.Random, on_result: Callable[[Candidate], None] = lambda c: None) -> SearchSummary:
    """Spend up to ``budget`` evaluations, one candidate at a time. The archive must already hold the baseline."""
    config = SearchConfig(Budget(evaluations=budget), in_flight=1)
    return Search(archive, [operator], [evaluate], config, rng, on_result=on_result).run()
