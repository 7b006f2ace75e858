"""Timing as the judge runs it: samples alternated between the two workers, then the judge's own clock.

``TimingSteps`` is the timing half of ``runners.judge.Judge``. The samples are the workers' claims; the judge
corroborates them with a pass over distinct slots that it times itself (``corroborate``), and holds speedups
and bandwidth against plausibility bounds (``implausible``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import statistics
import time

import torch

from .compare import compare_outputs, scale_ratios
from . import checkpoints
from .inputs import case_shapes
from .protocol import Quarantine, Refusal, commitment_of, meta_nbytes, trial_seed
from .results import CaseResult
from .task import Case
from . import interrupts
from .alone import Alone
from .commitments import matches
from .openings import compare_chunks

from .corroboration import (  # noqa: F401 - re-exported: the judge's clock, in one place
    CROSS_PROCESS_US_PER_SLOT, MAX_PLAUSIBLE_SPEEDUP, Corroboration, corroborate, credit_cap, implausible)
from .sample_stats import decided, spread
from .window_checks import WindowChecks

WINDOW_SPIN_S = 0.25  # the judge polls this long for a window's reply before sleeping on the pipe (window_quiet)
WORKER_SPIN_S = 0.02  # and asks the worker to poll this long for the window request after its warm-up
WARM_MAX_REPLAYS = 64  # the warm-up's passes at most (a pass of a few slots at decode sizes is short)
LEAD_CYCLES_PER_SLOT = 30  # the window's lead per slot, up to Protocol.window_lead_cycles (8192 slots: about all of it)

class TimingSteps(WindowChecks, Alone):
    """Methods of the judge that time; they use its spec, its protocol ``p`` and its two workers."""

    ambient_irq: float | None = None  # the machine's interrupts a ms without a candidate (the evaluator's; storm)

    @contextlib.contextmanager
    def _spent(self, name: str):
        """Seconds per part of a phase, under ``name`` in ``Evaluation.phases`` (``timing.*``, ``correctness.*``)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - t0

    def _per_call_bytes(self, case: Case) -> int:
        shapes = case_shapes(self.spec.args, case)
        elem = torch.empty(0, dtype=getattr(torch, case.dtype)).element_size()
        return max(1, sum(math.prod(s) for s in shapes.values()) * elem * 2)  # inputs and outputs, about

    def _slot_count(self, case: Case, target_us: float, cap_bytes: int, most: int) -> int:
        per_call = self._per_call_bytes(case)
        est_us = 2.0 + per_call / 3e6  # launch floor + bytes at ~3 TB/s
        return int(max(2, min(most, math.ceil(target_us / est_us), cap_bytes // per_call)))

    def _bank_request(self, case: Case, count: int, seed: int) -> dict:
        return {"args": [dataclasses.asdict(a) for a in self.spec.args], "case": dataclasses.asdict(case),
                "count": count, "seed": seed}

    def time_case(self, case: Case, index: int, secret: int, result: CaseResult) -> None:
        p = self.p
        count = self._slot_count(case, p.slot_us, p.slot_bytes, p.max_slots)
        bank = self._bank_request(case, count, trial_seed(secret, 20_000, index))
        with self._spent("timing.prepare"):  # each side alone: the oracle may autotune here (new keys, round 19)
            with self._alone(self.oracle):
                rb = self.oracle.request("prepare_timing", which="sample", **bank)
            rc = self.candidate.request("prepare_timing", which="sample", **bank) if rb.get("ok") else {}
        if not rb.get("ok"):
            raise Refusal("baseline", f"the baseline could not be timed: {rb.get('error')}")
        if not rc.get("ok"):
            raise Refusal("timing", f"could not be timed: {rc.get('error')}")
        per_call = max(float(rb["per_call_us"]), 0.5)
        replays = max(1, math.ceil(p.sample_us / (per_call * count)))
        samples_b, samples_c = [], []
        with self._spent("timing.samples"):
            self._sample_rounds(replays, samples_b, samples_c)
        result.baseline_us, result.baseline_spread = statistics.median(samples_b), spread(samples_b)
        result.candidate_us, result.candidate_spread = statistics.median(samples_c), spread(samples_c)
        result.samples, result.slots = len(samples_c), count
        result.timing_method = rb["method"] if rb["method"] == rc["method"] else f"{rb['method']}/{rc['method']}"
        with self._spent("timing.host"):
            result.baseline_host_us = float(self.oracle.request("host_overhead")["us"])
            hc = self.candidate.request("host_overhead")
            result.candidate_host_us = float(hc["us"]) if hc.get("ok") else None
            for worker in (self.oracle, self.candidate):
                worker.request("release")
        if not p.window_every_case and result.candidate_us * p.clock_above >= result.baseline_us:
            # Screening: no speedup worth a clock is claimed here. A claim under ``clock_above`` (within the
            # screening's noise) is credited parity, never more, unclocked. The claim is the worker's, though, and a
            # slowdown can hide behind a claim of parity: one such case per evaluation, picked in secret, is clocked
            # after all cases are sampled (``spot_check``).
            if result.candidate_us < result.baseline_us:
                result.claimed_us, result.candidate_us = result.candidate_us, result.baseline_us
                result.add_message(f"claimed {result.baseline_us / result.claimed_us:.3f}x, under the screening's "
                                   f"{p.clock_above:.2f}x: credited 1.00x, not clocked")
            self.unclocked.append((case, index, result))
            return
        with self._spent("timing.window"):
            self._corroborate(case, index, secret, result)

    def spot_check(self, secret: int) -> None:
        """Screening: the judge's clock at one of the cases where no speedup was claimed, chosen from the secret
        (a worker that claims parity where it is slower is quarantined when its case is drawn, and cannot tell
        which will be); the other unclocked cases say so."""
        if not self.unclocked:
            return
        pick = trial_seed(secret, 90_000, len(self.unclocked)) % len(self.unclocked)
        for k, (_, _, result) in enumerate(self.unclocked):
            if k != pick:
                result.add_message("judge's clock: not run (no speedup claimed; another case was spot-checked)")
        case, index, result = self.unclocked[pick]
        with self._spent("timing.window"):
            self._corroborate(case, index, secret, result)

    def _sample_rounds(self, replays: int, samples_b: list, samples_c: list) -> None:
        """Samples alternated between the two workers until both spreads are under target or the time cap."""
        p = self.p
        started = time.perf_counter()
        for round_ in range(p.max_rounds):
            pair = [(self.oracle, samples_b), (self.candidate, samples_c)]
            for worker, samples in (pair if round_ % 2 == 0 else pair[::-1]):
                with self._alone(worker):
                    reply = worker.request("sample", replays=replays, lead_cycles=p.sample_lead_cycles)
                if not reply.get("ok"):
                    raise Refusal("timing", f"sampling failed: {reply.get('error')}")
                us = reply.get("us")
                if type(us) not in (int, float) or not math.isfinite(us) or us <= 0:
                    raise Refusal("timing", f"a sample time that is not a positive number: {str(us)[:40]}")
                samples.append(float(us))
            if round_ + 1 >= p.min_rounds and (
                    (spread(samples_b) <= p.target_spread and spread(samples_c) <= p.target_spread)
                    or decided(samples_b, samples_c, p.decisive_margin)
                    or time.perf_counter() - started > p.case_time_cap_s):
                break

    def _spins(self) -> bool:
        """Whether the window's replies are polled for: on a GPU only. Where the device is the CPU (the interpreter's
        timed stand-in), a polling process takes a core from the work being timed: on two cores the stand-in's clock
        then saw a worker that forged 4x at up to 3.4x, and passed it (about one run in six)."""
        return self.p.window_quiet and getattr(self, "device", "cuda") == "cuda"

    def _window(self, worker, seed: int, key: int, count: int) -> tuple[float, dict]:
        # The lead covers the start of the host's enqueueing (the pass's graphs are launched while the device runs the
        # ones before, runners/timing.py GRAPH_SLOTS), which grows with the slots: at a few slots of a large
        # call the fill alone keeps the device busy that long, and a fixed lead, never credited
        # (runners/corroboration.py), cost an honest candidate 7-14 % of a 1-2 ms pass (the H200, T=4096)
        lead = min(self.p.window_lead_cycles, LEAD_CYCLES_PER_SLOT * count)
        quiet = self.p.window_quiet and gc.isenabled()
        if quiet:
            gc.disable()
        try:
            t0 = time.perf_counter()
            reply = worker.request("window", seed=seed, lead_cycles=lead, key=key, quiet=self.p.window_quiet,
                                   spin_s=WINDOW_SPIN_S if self._spins() else 0.0)
            elapsed_us = (time.perf_counter() - t0) * 1e6
        finally:
            if quiet:
                gc.enable()
        if not reply.get("ok"):
            raise Refusal("timing", f"the timed window failed: {reply.get('error')}")
        return elapsed_us, reply

    def _corroborate(self, case: Case, index: int, secret: int, result: CaseResult) -> None:
        """The judge's own clock. Each side captures one pass over N slots, all with distinct values made from
        a seed sent just before (so nothing can be remembered from earlier calls and no call can be skipped
        unseen); the judge times that pass, and the worker must answer with a commitment to every slot's
        outputs: one digest (runners/commitments.py ``digest``, keyed per round) of the slots' keyed hashes, so that the
        timed reply carries no host work per slot. Then the judge picks slots in secret, has them shown with the
        per-slot hashes (one binary file, read after the clock), checks that those hash to the digest, that each
        shown slot's outputs hash to its own, and that they match the oracle's on the same values; and it has every
        slot (up to ``open_slots``) opened: a few chunks each, climbed to the nodes of the rows the digest covers and
        compared with the oracle's (runners/openings.py). Rounds alternate sides; the shortest pass counts."""
        p = self.p
        count = self._slot_count(case, p.window_us, p.window_bytes, p.max_window_slots)
        bank = self._bank_request(case, count, trial_seed(secret, 40_000, index))
        # An entry that works in place (returns None, writes `x` and `residual`) has its written inputs committed
        # to, shown and compared with what it returns: otherwise nothing it computes in the window is checked
        bank["written"] = list(self.spec.written)
        bank["checkpoints"] = checkpoints.draw(self.spec, case, count, p, trial_seed(secret, 45_000, index))
        for worker in (self.oracle, self.candidate):
            with self._spent("timing.window_prepare"), self._alone(worker):  # the oracle may autotune here
                reply = worker.request("prepare_timing", which="window", **bank)
            if not reply.get("ok"):
                raise Refusal("timing" if worker is self.candidate else "baseline",
                              f"the judge's window could not be prepared: {reply.get('error')}")
        tol = self.spec.tolerances_for(case.dtype)
        per_slot = self._per_call_bytes(case)
        # at least two slots a round (a few hundred MB each at prefill sizes), within the fetch budget otherwise
        reveal = min(count, max(2, p.max_fetch_bytes // per_slot), p.reveal_slots)
        # A claim just past what the clock resolves (``window_retry_band`` past it) is measured again on fresh
        # values (``window_retries``) before the candidate is quarantined: an honest baseline was quarantined against
        # itself on the H200 by 1.4 % (LayerNorm, M=1, fifteenth session). A claim further off is quarantined at
        # once, and what is credited is held to the lowest view of every measurement (below), so the second chance
        # credits a forged claim no more than the clock saw.
        # each side's window follows a warm-up of about ``window_warm_us`` of its own passes (by the oracle's time a call)
        warm = max(1, min(WARM_MAX_REPLAYS, math.ceil(p.window_warm_us / max(result.baseline_us * count, 1.0))))
        verdicts = []
        for attempt in range(1 + max(0, p.window_retries)):
            walls_b, walls_c, passes_b, shaveable_b, leads_b, parts_b, parts_c, checks_b = self._clock_rounds(
                case, index, secret, count, bank, reveal, tol, 1000 * attempt, warm)
            verdict = corroborate(walls_b, passes_b, walls_c, result.baseline_us, result.candidate_us,
                                  p.corroboration_tolerance, p.clock_jitter_us, shaveable_b, count, leads_b, checks_b)
            verdicts.append(verdict)
            near = verdict.claimed <= verdict.judge_speedup * (1 + verdict.allowed) * (1 + p.window_retry_band)
            if verdict.ok or not near:
                break
        for worker in (self.oracle, self.candidate):
            worker.request("release")
        noisy = interrupts.storm([q.get("irq") for q in parts_b], [q.get("irq") for q in parts_c],
                                 self.ambient_irq)
        if noisy:  # the oracle's rounds were slowed by what no clock difference can tell: credit no speedup
            result.add_message(f"judge's clock: {noisy}")
            for v in verdicts:
                v.resolved = False
        result.window_ms = [round(w / 1000, 4) for w in walls_b + walls_c]
        result.window_parts, result.window_slots, result.window_claimed_parts = parts_b, count, parts_c
        if verdict.resolved:
            result.judge_us = result.baseline_us / verdict.judge_speedup
            result.judge_ratio = result.judge_us / result.candidate_us if result.candidate_us else None
        else:  # the clock could not resolve this size: no number of its own, and no credit beyond 1.0x below
            result.add_message("judge's clock: unresolved at this size")
        if not verdict.ok:
            raise Quarantine(f"{case.id}: the candidate's claimed speedup {verdict.claimed:.3f}x is above what "
                                    f"the judge's clock saw, {verdict.judge_speedup:.3f}x over {count} calls on fresh "
                                    f"values (allowed {verdict.allowed:.0%} for the clock's resolution at this size; "
                                    f"{len(verdicts)} measurement(s), each beyond it): timing not corroborated, "
                                    f"quarantined")
        # Within the allowance, a speedup counts only as far as the judge's clock saw it (plus its tolerance):
        # what the clock cannot resolve is never credited to the candidate.
        cap = min(credit_cap(v, p.corroboration_tolerance) for v in verdicts)
        if verdict.claimed > cap:
            result.claimed_us = result.candidate_us
            result.candidate_us = result.baseline_us / cap

    def _clock_rounds(self, case: Case, index: int, secret: int, count: int, bank: dict, reveal: int, tol,
                      offset: int, warm: int = 1) -> tuple:
        """One measurement of the judge's clock: ``window_rounds`` rounds, the sides alternated, each round's outputs
        shown, opened and traced against the oracle's. Returns the walls, the oracle's passes, shaveable parts, leads
        and parts, the candidate's own parts and the checkpoints' time (``corroborate``'s lists)."""
        p = self.p
        walls_b, walls_c, passes_b, shaveable_b, leads_b, parts_b, checks_b = [], [], [], [], [], [], []
        parts_c = []  # the candidate's own account of its requests: never used, kept to diagnose the clock
        for r in range(p.window_rounds):
            round_ = r + offset  # each measurement's rounds draw their own seeds
            seed = trial_seed(secret, 50_000 + round_, index)
            key = trial_seed(secret, 65_000 + round_, index)  # the commitments' key, sent with the timed request
            pair = [(self.oracle, walls_b), (self.candidate, walls_c)]
            replies, irqs = {}, {}
            for worker, walls in (pair if r % 2 == 0 else pair[::-1]):
                # Clocks up on other values; this round's seed is sent only with the timed request, so no
                # work on these values can happen before the judge's clock runs.
                with self._alone(worker, settled=True), self._spent("timing.window_passes"):
                    worker.request("refill", which="window", seed=trial_seed(secret, 55_000 + round_, index))
                    worker.request("sample", which="window", replays=warm,
                                   spin_next=WORKER_SPIN_S if self._spins() else 0.0)
                    irq = interrupts.total()
                    wall, replies[worker.role] = self._window(worker, seed, key, count)
                    irqs[worker.role] = interrupts.per_ms(irq, interrupts.total(), wall)
                walls.append(wall)
            oracle_reply = replies["oracle"]
            passes_b.append(float(oracle_reply.get("pass_us", 0.0)))
            # What a candidate's worker could leave out of its own request (the lead sleep, the commitments done
            # some cheaper way) and so take off the time the judge credits to its pass: the oracle's, measured.
            shaveable_b.append(float(oracle_reply.get("lead_us", 0.0)) + float(oracle_reply.get("commit_us", 0.0)))
            leads_b.append(float(oracle_reply.get("lead_us", 0.0)))
            parts_b.append({**_parts(oracle_reply), "irq": irqs["oracle"]})
            parts_c.append({**_parts(replies["candidate"]), "irq": irqs["candidate"]})
            root = replies["candidate"].get("commitment")
            if type(root) is not int:
                raise Refusal("timing", "the judge's window ended without a commitment to every slot's outputs")
            g = torch.Generator().manual_seed(trial_seed(secret, 60_000 + round_, index))
            shown = sorted(torch.randperm(count, generator=g)[:reveal].tolist())
            # Every slot (up to ``open_slots``) is opened besides: chunks drawn from a seed sent now, each under a node
            # of the rows the digest covers (runners/openings.py), compared with the oracle's chunks
            opened = sorted(torch.randperm(count, generator=g)[:p.open_slots].tolist())
            opening = {"slots": opened, "seed": trial_seed(secret, 62_000 + round_, index), "per": p.open_chunks,
                       "key": key}
            # The oracle's outputs are read, checked against its commitments and removed before the candidate
            # is asked for anything: nothing the candidate writes can stand in for them.
            # the checkpoints' time alone, the oracle's only, taken off both passes: timed with the candidate's
            # processes held stopped, as for the oracle's window (a candidate running then could keep the device busy
            # and magnify every difference the clock sees: round 24's C, round 25's B)
            with self._spent("timing.window_reveal"), self._alone(self.oracle, settled=True):
                ref_outs = self.oracle.request("reveal", slots=shown, tag=f"w{index}r{round_}", open=opening,
                                               time_checks=True)
            if not ref_outs.get("ok"):
                raise Refusal("baseline", "the oracle's outputs of the judge's window could not be read back")
            ref_hashes = self._window_hashes(self.oracle, ref_outs, count, key, replies["oracle"].get("commitment"))
            ref_chunks = self._opened(self.oracle, ref_outs, opening, count, None, ref_hashes)
            checks_b.append(float(ref_outs.get("checks_us", 0.0)))
            parts_b[-1]["checks"] = round(checks_b[-1] / 1000, 4)
            refs = {}
            for k in shown:
                refs[k] = self._decode(self.oracle, ref_outs["outs"][str(k)], 1 << 40)
                if commitment_of(refs[k]) != ref_outs["sums"][str(k)]:
                    raise Refusal("baseline", "the oracle's outputs changed on their way to the judge (tampering)")
            self._clear_outbox(self.oracle)
            with self._spent("timing.window_reveal"):
                got_outs = self.candidate.request("reveal", slots=shown, tag=f"w{index}r{round_}", open=opening)
            if not got_outs.get("ok"):
                raise Refusal("timing", "the outputs of the judge's window could not be read back")
            commits, rows, traces = self._window_hashes(self.candidate, got_outs, count, key, root)
            for k in shown:
                ref_meta = ref_outs["outs"][str(k)]
                ref = refs[k]
                out = self._decode(self.candidate, got_outs["outs"].get(str(k)), meta_nbytes(ref_meta))
                if not matches(commits[k], commitment_of(out, key)):
                    raise Refusal("timing", f"{case.id}: slot {k} of the judge's window: the outputs shown are not "
                                            f"the ones committed to when the pass ended (work done after the clock "
                                            f"stopped)")
                cmp = compare_outputs(out, ref, tol, self.first_scales.get(case.id))
                if not cmp.ok:
                    raise Refusal("timing", f"{case.id}: outputs of the timed calls are wrong (slot {k} of the "
                                            f"judge's window, fresh values): {cmp.message}")
            shape = {b: (r[0], r[1], r[3]) for b, r in rows.items()}  # where the baseline's outputs have rows,
            if shape != {b: (r[0], r[1], r[3]) for b, r in ref_hashes[1].items()}:  # over its slots, so must these
                mine, its = sorted({b[0] for b in shape}), sorted({b[0] for b in ref_hashes[1]})
                raise Refusal("timing", f"{case.id}: the judge's window: the rows of nodes committed to (outputs "
                                        f"{mine}) are not the baseline's (outputs {its}): outputs of another size "
                                        f"or shape, or kept from the openings")
            wrong = compare_chunks(self._opened(self.candidate, got_outs, opening, count, root, (commits, rows)),
                                   ref_chunks, tol, scale_ratios([refs[k] for k in shown],
                                                                 self.first_scales.get(case.id)))
            if wrong:
                raise Refusal("timing", f"{case.id}: outputs of the timed calls are wrong ({wrong}; an opened chunk of "
                                        f"the judge's window, fresh values)")
            # right when the pass ended (above), and right when each call returned (the checkpoints)
            wrong = checkpoints.traces_wrong(bank["checkpoints"], traces, ref_hashes[2], tol)
            if wrong:
                raise Refusal("timing", f"{case.id}: {wrong}")
            self._clear_outbox(self.oracle)
            self._clear_outbox(self.candidate)
        return walls_b, walls_c, passes_b, shaveable_b, leads_b, parts_b, parts_c, checks_b

    def reference_time(self, case: Case, index: int, secret: int, result: CaseResult) -> None:
        """torch.compile of the torch reference, timed in the oracle worker over the same kind of slots."""
        count = self._slot_count(case, self.p.slot_us, self.p.slot_bytes, self.p.max_slots)
        bank = self._bank_request(case, count, trial_seed(secret, 80_000, index))
        reply = self.oracle.request("prepare_timing", which="sample", reference=True, **bank)
        if not reply.get("ok"):
            result.message = f"torch.compile reference not timed: {str(reply.get('error'))[:200]}"
            return
        replays = max(1, math.ceil(self.p.sample_us / (max(float(reply["per_call_us"]), 0.5) * count)))
        with self._alone(self.oracle):
            request = {"replays": replays, "reference": True, "lead_cycles": self.p.sample_lead_cycles}
            samples = [float(self.oracle.request("sample", **request)["us"]) for _ in range(15)]
        result.reference_us = statistics.median(samples)
        self.oracle.request("release", reference=True)

    def release(self) -> None:
        for worker in (self.oracle, self.candidate):
            worker.request("release")



def _parts(reply: dict) -> dict:
    """A window reply's parts in ms: device (pass, fill, commit, lead, by its events) and host (lead to commitment;
    queue: the host's time to queue the fill; replay: to launch the pass)."""
    parts = {}
    for part in ("pass", "fill", "commit", "lead", "host", "queue", "replay"):
        try:
            parts[part] = round(float(reply.get(f"{part}_us", 0.0)) / 1000, 4)
        except (TypeError, ValueError):  # the candidate's are its own to write
            parts[part] = None
    return parts
