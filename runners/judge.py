"""The judge: makes the inputs, holds the tolerances, compares, times by its own clock and decides.

It runs in kernelsmith's process. Candidate code never runs here: the oracle worker runs only the baseline,
the candidate worker only the candidate, and what comes back from either is raw bytes that the judge turns
into plain tensors (runners/wire.py). The steps, per evaluation:

1. correctness: per case and trial, fresh inputs from the judge's secret seed (scales across orders of
   magnitude and structured rows after trial 0), the same bytes to both workers; outputs of the candidate
   must have the oracle's structure, dtypes, shapes and strides and match within the dtype's tolerance;
   inputs not declared written must come back unchanged; the candidate must launch a Triton kernel of its
   own (module inside the candidate's package).
2. timing (GPU backends): both workers capture a graph over the same rotating slots; the judge alternates
   samples between them until the spread is under target or a time cap; then it writes fresh values into
   every slot, runs a long window on each side by its own clock, checks every slot's outputs (and the
   checksums each worker committed to before showing them), and quarantines a candidate whose claimed
   time disagrees with what the judge's clock saw.
3. a correctness re-check after timing, and plausibility (speedup bound, bandwidth above the measured peak).
"""
from __future__ import annotations

import dataclasses
import math
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .compare import compare_outputs
from .inputs import case_shapes, make_inputs
from .results import CaseResult, Evaluation
from .task import Case, TaskSpec
from .timing import matches
from .wire import decode_value, encode_value, tensor_layouts

MAX_PLAUSIBLE_SPEEDUP = 10.0


@dataclass
class Protocol:
    """The judge's numbers, in one place."""

    target_spread: float = 0.01  # interquartile range / median per side
    min_rounds: int = 10
    max_rounds: int = 200
    case_time_cap_s: float = 1.5  # sampling time per case (both sides)
    sample_us: float = 2000.0  # device time of one sample
    slot_us: float = 200.0  # device time of one replay of every slot (sets how many slots)
    max_slots: int = 64
    slot_bytes: int = 1 << 30  # memory for the rotating slots of one side
    window_us: float = 10000.0  # the judge's corroboration pass per side: this long, or as long as memory allows
    window_bytes: int = 4 << 30  # memory for the window's distinct slots, per side
    max_window_slots: int = 2048
    window_rounds: int = 3  # alternated passes per side, fresh values each; the shortest counts
    corroboration_tolerance: float = 0.05  # |judge's clock / claimed - 1| allowed, plus the clock's jitter
    clock_jitter_us: float = 150.0  # round trip of a request, as a share of a short pass
    reveal_slots: int = 16  # slots the judge has shown after each pass, chosen in secret
    window_lead_cycles: int = 1_000_000  # device sleep queued before the pass (about 0.5 ms at 2 GHz)
    max_fetch_bytes: int = 256 << 20
    min_own_share: float = 0.5  # the candidate's own kernels' share of its device time, relative to the baseline's


def trial_seed(secret: int, trial: int, case_index: int) -> int:
    return (secret * 1_000_003 + trial * 7919 + case_index) % (2**63)


def _nbytes(values) -> int:
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (list, tuple)):
        return sum(_nbytes(v) for v in values)
    return values.numel() * values.element_size() if isinstance(values, torch.Tensor) else 0


class Refusal(Exception):
    """The candidate is refused at ``stage`` for ``reason``."""

    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage, self.reason = stage, reason


@dataclass
class Exchange:
    """The judge's folder of input files; workers read it, and each writes outputs to its own outbox."""

    root: Path
    counter: int = 0
    files: list = field(default_factory=list)

    def write_inputs(self, kwargs: dict) -> dict:
        self.counter += 1
        metas = {}
        for name, value in kwargs.items():
            metas[name] = encode_value(self.root, f"in{self.counter}-{name}", value)
        return metas

    def clear(self) -> None:
        for p in self.root.iterdir():
            p.unlink(missing_ok=True)


class Judge:
    def __init__(self, spec: TaskSpec, backend, oracle, candidate, exchange: Exchange, device: str,
                 protocol: Protocol | None = None, env_info: dict | None = None, package: str = "ks_candidate"):
        self.spec, self.backend = spec, backend
        self.oracle, self.candidate = oracle, candidate
        self.exchange, self.device = exchange, device
        self.p = protocol or Protocol()
        self.env_info = env_info or {}
        self.package = package
        self.autotune: dict = {}

    # ---- helpers ------------------------------------------------------------------------------------------
    def _decode(self, worker, meta, max_bytes: int):
        value = decode_value(meta, worker.outbox, max_bytes, self.device)
        return value

    def _clear_outbox(self, worker) -> None:
        for p in Path(worker.outbox).iterdir():
            p.unlink(missing_ok=True)

    def _oracle_call(self, metas: dict, tag: str, inputs: dict, reference: bool = False):
        reply = self.oracle.request("call", inputs=metas, tag=tag, written=self.spec.written, reference=reference)
        if not reply.get("ok"):
            raise Refusal("baseline", f"the baseline itself failed on these inputs: {reply.get('error')}\n"
                                      f"{reply.get('traceback', '')}")
        out = self._decode(self.oracle, reply["out"], 1 << 40)
        written = {n: self._decode(self.oracle, m, 1 << 40) for n, m in reply.get("written", {}).items()}
        self._clear_outbox(self.oracle)  # nothing of the oracle's stays on disk for the candidate to find
        # The oracle says what it read and what it wrote; the files in between are checked against that, so a
        # process that rewrites them on the way (the inputs before the oracle reads them, its outputs before
        # the judge does) is caught.
        if _commitment(out) != reply.get("out_sum"):
            raise Refusal("baseline", "the oracle's outputs changed on their way to the judge (tampering)")
        if any(_commitment(v) != reply.get("input_sums", {}).get(k) for k, v in inputs.items()
               if isinstance(v, torch.Tensor)):
            raise Refusal("baseline", "the inputs changed on their way to the oracle (tampering)")
        if not reference:
            self.autotune = reply.get("autotune") or {}
        return reply, out, written

    def _candidate_call(self, metas: dict, tag: str, ref_reply: dict, poison: int):
        reply = self.candidate.request("call", inputs=metas, tag=tag, written=self.spec.written,
                                       pin=self.autotune, poison_bytes=poison)
        if not reply.get("ok"):
            stage = reply.get("stage") if reply.get("stage") in ("compile", "correctness") else "correctness"
            raise Refusal(stage, f"{reply.get('error')}\n{reply.get('traceback', '')}".strip())
        want, got = tensor_layouts(ref_reply["out"]), tensor_layouts(reply["out"])
        if [(d, s) for d, s, _ in want] != [(d, s) for d, s, _ in got]:
            raise Refusal("correctness", f"returned tensors {[(d, s) for d, s, _ in got]}, the baseline returns "
                                         f"{[(d, s) for d, s, _ in want]} (dtype, shape)")
        for i, ((_, _, ws), (_, _, gs)) in enumerate(zip(want, got)):
            if ws != gs:
                raise Refusal("correctness", f"output {i} has strides {gs}, the baseline's has {ws} (callers "
                                             f"may rely on the layout)")
        budget = _nbytes_meta(ref_reply["out"]) + sum(_nbytes_meta(m) for m in ref_reply.get("written", {}).values())
        out = self._decode(self.candidate, reply["out"], budget)
        written = {n: self._decode(self.candidate, m, budget) for n, m in reply.get("written", {}).items()}
        self._clear_outbox(self.candidate)
        return reply, out, written

    def _own(self, launched: list[str]) -> list[str]:
        return [k for k in launched if k.split(":")[0] == self.package or k.startswith(self.package + ".")]

    # ---- correctness ------------------------------------------------------------------------------------
    def check_case(self, case: Case, index: int, secret: int, trials: int, result: CaseResult) -> None:
        tol = self.spec.tolerance(case.dtype)
        for trial in range(trials):
            inputs = make_inputs(self.spec.args, case, self.device, trial_seed(secret, trial, index), trial)
            metas = self.exchange.write_inputs(inputs)
            ref_reply, ref, ref_written = self._oracle_call(metas, f"c{index}t{trial}", inputs)
            poison = 2 * _nbytes(ref) + (1 << 20)
            reply, out, written = self._candidate_call(metas, f"c{index}t{trial}", ref_reply, poison)
            self.exchange.clear()
            names = list(self.spec.written)
            cmp = compare_outputs([out, [written.get(n) for n in names]], [ref, [ref_written.get(n) for n in names]],
                                  tol)
            result.trials = trial + 1
            result.max_abs_err = max(result.max_abs_err, cmp.max_abs_err)
            result.err_ratio = max(result.err_ratio, cmp.err_ratio)
            if not cmp.ok:
                raise Refusal("correctness", f"trial {trial}: {cmp.message}")
            if reply.get("modified"):
                raise Refusal("correctness", f"trial {trial}: input `{reply['modified'][0]}` was modified, but the "
                                             f"spec does not list it as written")
            if trial == 0:
                result.bytes_moved = _nbytes(inputs) + _nbytes(ref) + _nbytes(list(ref_written.values()))
                result.launched = list(reply.get("launched", []))
                result.autotune = dict(reply.get("pinned", {}))
        if not self._own(result.launched):
            others = ", ".join(result.launched) or "none"
            raise Refusal("kernel", f"the candidate launched no Triton kernel of its own (kernels launched: "
                                    f"{others}); a torch-only or borrowed computation is not an "
                                    f"optimisation of the kernel")

    # ---- timing -----------------------------------------------------------------------------------------
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
        rb = self.oracle.request("prepare_timing", which="sample", **bank)
        if not rb.get("ok"):
            raise Refusal("baseline", f"the baseline could not be timed: {rb.get('error')}")
        rc = self.candidate.request("prepare_timing", which="sample", **bank)
        if not rc.get("ok"):
            raise Refusal("timing", f"could not be timed: {rc.get('error')}")
        per_call = max(float(rb["per_call_us"]), 0.5)
        replays = max(1, math.ceil(p.sample_us / (per_call * count)))
        samples_b, samples_c = [], []
        started = time.perf_counter()
        for round_ in range(p.max_rounds):
            pair = [(self.oracle, samples_b), (self.candidate, samples_c)]
            for worker, samples in (pair if round_ % 2 == 0 else pair[::-1]):
                reply = worker.request("sample", replays=replays)
                if not reply.get("ok"):
                    raise Refusal("timing", f"sampling failed: {reply.get('error')}")
                samples.append(float(reply["us"]))
            if round_ + 1 >= p.min_rounds and (
                    (_spread(samples_b) <= p.target_spread and _spread(samples_c) <= p.target_spread)
                    or time.perf_counter() - started > p.case_time_cap_s):
                break
        result.baseline_us, result.baseline_spread = statistics.median(samples_b), _spread(samples_b)
        result.candidate_us, result.candidate_spread = statistics.median(samples_c), _spread(samples_c)
        result.samples, result.slots = len(samples_c), count
        result.timing_method = rb["method"] if rb["method"] == rc["method"] else f"{rb['method']}/{rc['method']}"
        result.baseline_host_us = float(self.oracle.request("host_overhead")["us"])
        hc = self.candidate.request("host_overhead")
        result.candidate_host_us = float(hc["us"]) if hc.get("ok") else None
        for worker in (self.oracle, self.candidate):
            worker.request("release")
        self._corroborate(case, index, secret, result)

    def _window(self, worker, seed: int) -> tuple[float, dict]:
        t0 = time.perf_counter()
        reply = worker.request("window", seed=seed, lead_cycles=self.p.window_lead_cycles)
        elapsed_us = (time.perf_counter() - t0) * 1e6
        if not reply.get("ok"):
            raise Refusal("timing", f"the timed window failed: {reply.get('error')}")
        return elapsed_us, reply

    def _corroborate(self, case: Case, index: int, secret: int, result: CaseResult) -> None:
        """The judge's own clock. Each side captures one pass over N slots, all with distinct values made from
        a seed sent just before (so nothing can be remembered from earlier calls and no call can be skipped
        unseen); the judge times that pass, and the worker must answer with a commitment to every slot's
        outputs. Then the judge picks slots in secret, has them shown, checks them against the oracle's on the
        same values and against the commitments. Rounds alternate sides; the shortest pass counts."""
        p = self.p
        count = self._slot_count(case, p.window_us, p.window_bytes, p.max_window_slots)
        bank = self._bank_request(case, count, trial_seed(secret, 40_000, index))
        for worker in (self.oracle, self.candidate):
            reply = worker.request("prepare_timing", which="window", **bank)
            if not reply.get("ok"):
                raise Refusal("timing" if worker is self.candidate else "baseline",
                              f"the judge's window could not be prepared: {reply.get('error')}")
        tol = self.spec.tolerance(case.dtype)
        per_slot = self._per_call_bytes(case)
        reveal = min(count, max(4, p.max_fetch_bytes // per_slot), p.reveal_slots)
        walls_b, walls_c, passes_b = [], [], []
        for round_ in range(p.window_rounds):
            seed = trial_seed(secret, 50_000 + round_, index)
            pair = [(self.oracle, walls_b), (self.candidate, walls_c)]
            replies: dict = {}
            for worker, walls in (pair if round_ % 2 == 0 else pair[::-1]):
                # Clocks up on other values; this round's seed is sent only with the timed request, so no
                # work on these values can happen before the judge's clock runs.
                worker.request("refill", which="window", seed=seed ^ 0x5A5A)
                worker.request("sample", which="window", replays=1)
                wall, replies[worker.role] = self._window(worker, seed)
                walls.append(wall)
            passes_b.append(float(replies["oracle"].get("pass_us", 0.0)))
            commits = replies["candidate"].get("commitments")
            if not isinstance(commits, list) or len(commits) != count:
                raise Refusal("timing", "the judge's window ended without a commitment to every slot's outputs")
            g = torch.Generator().manual_seed(trial_seed(secret, 60_000 + round_, index))
            shown = sorted(torch.randperm(count, generator=g)[:reveal].tolist())
            # The oracle's outputs are read, checked against its commitments and removed before the candidate
            # is asked for anything: nothing the candidate writes can stand in for them.
            ref_outs = self.oracle.request("reveal", slots=shown, tag=f"w{index}r{round_}")
            if not ref_outs.get("ok"):
                raise Refusal("baseline", "the oracle's outputs of the judge's window could not be read back")
            refs = {}
            for k in shown:
                refs[k] = self._decode(self.oracle, ref_outs["outs"][str(k)], 1 << 40)
                if _commitment(refs[k]) != ref_outs["sums"][str(k)]:
                    raise Refusal("baseline", "the oracle's outputs changed on their way to the judge (tampering)")
            self._clear_outbox(self.oracle)
            got_outs = self.candidate.request("reveal", slots=shown, tag=f"w{index}r{round_}")
            if not got_outs.get("ok"):
                raise Refusal("timing", "the outputs of the judge's window could not be read back")
            for k in shown:
                ref_meta = ref_outs["outs"][str(k)]
                ref = refs[k]
                out = self._decode(self.candidate, got_outs["outs"].get(str(k)), _nbytes_meta(ref_meta))
                if type(commits[k]) is not int or not matches(commits[k], _commitment(out)):
                    raise Refusal("timing", f"{case.id}: slot {k} of the judge's window: the outputs shown are not "
                                            f"the ones committed to when the pass ended (work done after the clock "
                                            f"stopped)")
                cmp = compare_outputs(out, ref, tol)
                if not cmp.ok:
                    raise Refusal("timing", f"{case.id}: outputs of the timed calls are wrong (slot {k} of the "
                                            f"judge's window, fresh values): {cmp.message}")
            self._clear_outbox(self.oracle)
            self._clear_outbox(self.candidate)
        for worker in (self.oracle, self.candidate):
            worker.request("release")
        result.window_ms = [round(w / 1000, 4) for w in walls_b + walls_c]
        verdict = corroborate(walls_b, passes_b, walls_c, result.baseline_us, result.candidate_us,
                              p.corroboration_tolerance, p.clock_jitter_us)
        result.judge_us = result.baseline_us / verdict.judge_speedup
        result.judge_ratio = result.judge_us / result.candidate_us if result.candidate_us else None
        if not verdict.ok:
            raise Refusal("timing", f"{case.id}: the candidate's claimed speedup {verdict.claimed:.3f}x is above what "
                                    f"the judge's clock saw, {verdict.judge_speedup:.3f}x over {count} calls on fresh "
                                    f"values (allowed {verdict.allowed:.0%} for the clock's resolution at this size): "
                                    f"timing not corroborated, quarantined")

    def own_kernel_share(self, result: CaseResult) -> None:
        """Device time in the candidate's own Triton kernels, against the baseline's share (GPU only)."""
        own = {k.split(":")[1] for k in self._own(result.launched)}
        reply_c, reply_b = self.candidate.request("profile"), self.oracle.request("profile")
        if not (reply_c.get("ok") and reply_b.get("ok")):
            return
        share_c = _share(reply_c["kernels"], own)
        share_b = _share(reply_b["kernels"], None)
        result.own_kernel_share = share_c
        if share_c is not None and share_b is not None and share_c < self.p.min_own_share * share_b:
            raise Refusal("kernel", f"{result.case}: only {share_c:.0%} of the candidate's device time is in its own "
                                    f"Triton kernels (the baseline: {share_b:.0%}); the work is done elsewhere")

    def reference_time(self, case: Case, index: int, secret: int, result: CaseResult) -> None:
        """torch.compile of the torch reference, timed in the oracle worker over the same kind of slots."""
        count = self._slot_count(case, self.p.slot_us, self.p.slot_bytes, self.p.max_slots)
        bank = self._bank_request(case, count, trial_seed(secret, 80_000, index))
        reply = self.oracle.request("prepare_timing", which="sample", reference=True, **bank)
        if not reply.get("ok"):
            result.message = f"torch.compile reference not timed: {str(reply.get('error'))[:200]}"
            return
        replays = max(1, math.ceil(self.p.sample_us / (max(float(reply["per_call_us"]), 0.5) * count)))
        samples = [float(self.oracle.request("sample", replays=replays, reference=True)["us"]) for _ in range(15)]
        result.reference_us = statistics.median(samples)
        self.oracle.request("release", reference=True)

    def release(self) -> None:
        for worker in (self.oracle, self.candidate):
            worker.request("release")


@dataclass
class Corroboration:
    claimed: float  # the candidate's claimed speedup (sample medians)
    judge_speedup: float  # by the judge's clock
    allowed: float  # how far the claim may exceed the judge's speedup
    ok: bool


def corroborate(walls_b: list[float], passes_b: list[float], walls_c: list[float], baseline_us: float,
                candidate_us: float, tolerance: float, jitter_us: float) -> Corroboration:
    """Hold the candidate's claimed speedup against the judge's clock.

    ``walls_*`` are the judge's wall times of each side's passes (microseconds), ``passes_b`` the trusted
    oracle's own device time of its passes. A pass's wall time carries an extra beyond its kernels (lead sleep,
    commitments, the round trip), measured on the oracle; the candidate's pass by the judge's clock is its
    shortest wall time minus that extra. The first round is a warm-up (first-use costs in a fresh process)
    and is left out when there are three or more. The allowance is the tolerance plus what the judge cannot
    resolve: the extra itself and how much it moved, relative to the oracle's pass. On the H200, passes at
    decode sizes are a few milliseconds against a few milliseconds of extra, so the judge's clock there only
    catches gross forgeries; at prefill sizes it resolves about 15-25 %.
    """
    if len(walls_b) >= 3:
        walls_b, passes_b, walls_c = walls_b[1:], passes_b[1:], walls_c[1:]
    extras = [w - q for w, q in zip(walls_b, passes_b)]
    extra = statistics.median(extras)
    pass_b = min(passes_b)
    pass_c = max(min(walls_c) - extra, 1e-3)
    judge_speedup = pass_b / pass_c
    allowed = tolerance + (extra + max(extras) - min(extras) + jitter_us) / max(pass_b, 1e-3)
    claimed = baseline_us / candidate_us if candidate_us else float("inf")
    return Corroboration(claimed, judge_speedup, allowed, claimed <= judge_speedup * (1 + allowed))


def _share(kernels: list, names: set | None) -> float | None:
    total = sum(us for _, us in kernels)
    if total <= 0:
        return None
    if names is None:  # the baseline: all of its kernels that are Triton's (not aten/memcpy/memset)
        picked = sum(us for name, us in kernels if not _library_kernel(name))
    else:
        picked = sum(us for name, us in kernels if any(name == n or name.startswith(n) for n in names))
    return picked / total


def _library_kernel(name: str) -> bool:
    return any(s in name for s in ("at::", "aten::", "Memcpy", "Memset", "elementwise", "reduce_kernel", "cub::"))


def _spread(samples: list[float]) -> float:
    if len(samples) < 4:
        return float("inf")
    q = statistics.quantiles(samples, n=4)
    med = statistics.median(samples)
    return (q[2] - q[0]) / med if med else float("inf")


def _nbytes_meta(meta) -> int:
    if isinstance(meta, dict) and meta.get("kind") == "tensor":
        return int(meta.get("nbytes", 0))
    if isinstance(meta, dict) and meta.get("kind") == "seq":
        return sum(_nbytes_meta(m) for m in meta.get("items", []))
    return 0


def _commitment(out) -> int:
    from .timing import commitments

    return commitments([out])[0]


def implausible(result: CaseResult, peak_gbs: float, l2_bytes: int, max_speedup: float = MAX_PLAUSIBLE_SPEEDUP) -> str:
    """Why a timed result is too good to be believed ('' when it is plausible). Bandwidth is held against the
    measured DRAM peak only when the data cannot sit in L2."""
    if result.speedup and result.speedup > max_speedup:
        return f"{result.case}: speedup {result.speedup:.1f}x is above the plausibility bound {max_speedup:g}x"
    if result.bytes_moved and result.bytes_moved > l2_bytes and result.bandwidth_gbs and \
            result.bandwidth_gbs > 1.1 * peak_gbs:
        return (f"{result.case}: effective bandwidth {result.bandwidth_gbs:.0f} GB/s is above the measured "
                f"peak {peak_gbs:.0f} GB/s")
    return ""


def evaluate(judge: Judge, cases: list[Case], secret: int, trials: int, time_it: bool, reference: bool,
             ev: Evaluation, peak: tuple[float, int] | None) -> Evaluation:
    """The whole protocol for one candidate; ``ev`` arrives with stage 'correctness'."""
    mark = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        ev.phases[name] = ev.phases.get(name, 0.0) + now - mark
        mark = now

    try:
        for index, case in enumerate(cases):
            result = CaseResult(case=case.id)
            ev.cases.append(result)
            judge.check_case(case, index, secret, trials, result)
            result.correct = True
        phase("correctness")
        if time_it and judge.backend.timed:
            ev.stage = "timing"
            for index, (case, result) in enumerate(zip(cases, ev.cases)):
                judge.time_case(case, index, secret, result)
                result.bandwidth_gbs = result.bytes_moved / (result.candidate_us * 1e-6) / 1e9
                if reference and judge.spec.reference:
                    judge.reference_time(case, index, secret, result)
            largest = max(range(len(cases)), key=lambda i: ev.cases[i].bytes_moved or 0)
            judge.own_kernel_share(ev.cases[largest])
            judge.release()
            phase("timing")
            # A candidate that behaves while checked and cuts corners once the calls pile up is caught here.
            for index, case in enumerate(cases):
                judge.check_case(case, index, secret + 1, 1, CaseResult(case=case.id))
            phase("recheck")
            if peak:
                for result in ev.cases:
                    reason = implausible(result, *peak)
                    if reason:
                        raise Refusal("plausibility", f"quarantined: {reason}")
            ev.timed = True
        elif not judge.backend.timed:
            ev.notes.append("not timed: the Triton CPU interpreter runs kernels as numpy on the host; its times "
                            "say nothing about GPU speed")
        ev.stage, ev.ok = "done", True
    except Refusal as refusal:
        ev.stage, ev.error = refusal.stage, refusal.reason
        current = next((c for c in reversed(ev.cases)), None)
        if current is not None and refusal.stage in ("correctness", "compile", "kernel") and \
                not refusal.reason.startswith(current.case):
            ev.error = f"{current.case}: {refusal.reason}"
            current.message = refusal.reason
    finally:
        try:
            judge.exchange.clear()
        except OSError:
            pass
    return ev


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
