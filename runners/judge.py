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

import contextlib
from pathlib import Path

import torch

from .exchange import Exchange, clear_folder
from .compare import compare_outputs, flatten, output_scale, output_scales
from .inputs import make_inputs
from .layouts import layouts_to_try, masked_rows, row_padded, same_layout
from .judge_clock import MAX_PLAUSIBLE_SPEEDUP, Corroboration, TimingSteps, corroborate, implausible  # noqa: F401
from .kernel_share import KernelShare, borrowed_name
from .protocol import Protocol, Refusal, commitment_of, meta_nbytes, moved_bytes, nbytes_of, trial_seed
from .results import CaseResult
from .task import Case, TaskSpec
from .wire import decode_value, describe_structure, structure, tensor_layouts, unsupported

__all__ = ["Corroboration", "Exchange", "Judge", "MAX_PLAUSIBLE_SPEEDUP", "Protocol", "Refusal", "corroborate",
           "evaluate", "implausible", "trial_seed"]


class Judge(TimingSteps, KernelShare):
    def __init__(self, spec: TaskSpec, backend, oracle, candidate, exchange: Exchange, device: str,
                 protocol: Protocol | None = None, package: str = "ks_candidate"):
        self.spec, self.backend = spec, backend
        self.oracle, self.candidate = oracle, candidate
        self.exchange, self.device = exchange, device
        self.p = protocol or Protocol()
        self.package = package
        self.autotune: dict = {}
        # each case's outputs' sizes at its first trial (runners/compare.py output_scales): a later trial's smaller
        # outputs are held as a whole against them (round 8: zeros under the absolute tolerance)
        self.first_scales: dict[str, list] = {}
        self.defines_kernel = True  # the module defines a @triton.jit function (set by the evaluator)
        self.concurrent = False  # a trial's two calls at once (set by the evaluator where the uid wall stands)
        self.spent: dict[str, float] = {}  # seconds per part of the timing phase (``timing.*`` in the phases) and of
        # the correctness trials (``correctness.*``, the re-check's trials included)
        self.unclocked: list = []  # screening: (case, index, result) sampled without the judge's clock
        self.bystanders: list = []  # other workers (the warm spare, importing): stopped while anything is timed

    # ---- helpers ------------------------------------------------------------------------------------------
    def _decode(self, worker, meta, max_bytes: int):
        return decode_value(meta, worker.outbox, max_bytes, self.device)

    def _clear_outbox(self, worker) -> None:
        clear_folder(Path(worker.outbox))

    def _oracle_call(self, metas: dict, tag: str, inputs: dict, reference: bool = False):
        reply = self.oracle.request("call", inputs=metas, tag=tag, written=self.spec.written, reference=reference)
        return self._oracle_reply(reply, inputs, reference)

    def _oracle_reply(self, reply: dict, inputs: dict, reference: bool = False):
        if not reply.get("ok"):
            raise Refusal("baseline", f"the baseline itself failed on these inputs: {reply.get('error')}\n"
                                      f"{reply.get('traceback', '')}")
        out = self._decode(self.oracle, reply["out"], 1 << 40)
        written = {n: self._decode(self.oracle, m, 1 << 40) for n, m in reply.get("written", {}).items()}
        self._clear_outbox(self.oracle)  # nothing of the oracle's stays on disk for the candidate to find
        # The oracle says what it read and what it wrote; the files in between are checked against that, so a
        # process that rewrites them on the way (the inputs before the oracle reads them, its outputs before
        # the judge does) is caught.
        if commitment_of(out) != reply.get("out_sum"):
            raise Refusal("baseline", "the oracle's outputs changed on their way to the judge (tampering)")
        kinds = unsupported(reply["out"])
        if kinds:
            raise Refusal("baseline", f"the baseline returns a {kinds[0]}, which the judge cannot compare: an entry "
                                      f"must return tensors, numbers, short strings, None, or tuples, lists or "
                                      f"dicts (string keys) of them")
        if any(commitment_of(v) != reply.get("input_sums", {}).get(k) for k, v in inputs.items()
               if isinstance(v, torch.Tensor)):
            raise Refusal("baseline", "the inputs changed on their way to the oracle (tampering)")
        if not reference:
            self.autotune = reply.get("autotune") or {}
        return reply, out, written

    def _candidate_call(self, metas: dict, tag: str, ref_reply: dict, poison: int):
        reply = self.candidate.request("call", inputs=metas, tag=tag, written=self.spec.written,
                                       pin=self.autotune, poison_bytes=poison)
        return self._candidate_reply(reply, ref_reply)

    def _candidate_reply(self, reply: dict, ref_reply: dict):
        if not reply.get("ok"):
            stage = reply.get("stage") if reply.get("stage") in ("compile", "correctness") else "correctness"
            raise Refusal(stage, f"{reply.get('error')}\n{reply.get('traceback', '')}".strip())
        if structure(reply["out"]) != structure(ref_reply["out"]):  # callers unpack and index what they get
            raise Refusal("correctness", f"returned {describe_structure(structure(reply['out']))} where the "
                                         f"baseline returns {describe_structure(structure(ref_reply['out']))}")
        want, got = tensor_layouts(ref_reply["out"]), tensor_layouts(reply["out"])
        if [(d, s) for d, s, _ in want] != [(d, s) for d, s, _ in got]:
            raise Refusal("correctness", f"returned tensors {[(d, s) for d, s, _ in got]}, the baseline returns "
                                         f"{[(d, s) for d, s, _ in want]} (dtype, shape)")
        for i, ((_, shape, ws), (_, _, gs)) in enumerate(zip(want, got)):
            if not same_layout(shape, ws, gs):
                raise Refusal("correctness", f"output {i} has strides {gs}, the baseline's has {ws} (callers "
                                             f"may rely on the layout)")
        budget = meta_nbytes(ref_reply["out"]) + sum(meta_nbytes(m) for m in ref_reply.get("written", {}).values())
        out = self._decode(self.candidate, reply["out"], budget)
        written = {n: self._decode(self.candidate, m, budget) for n, m in reply.get("written", {}).items()}
        self._clear_outbox(self.candidate)
        return reply, out, written

    def _trial_calls(self, metas: dict, tag: str, inputs: dict, case: Case):
        """A trial's two calls on the same input files: the oracle's, then the candidate's (its poison sized by the
        oracle's outputs). Under the uid wall (``concurrent``: the candidate's user cannot read the oracle's folder,
        runners/isolation.py) both run at once where this oracle has answered the case before, no argument is a
        drawn integer range (an output's size may follow it, and the poison is sized from the size seen) and the
        baseline's calls go through no autotuner, in any module (round 19). The candidate's request goes first and
        both replies are received before either is read, so a candidate gone at the send is the candidate's and a
        refusal leaves no reply in a pipe. Where the oracle may autotune (a case it has not answered, a baseline
        with autotuners) the candidate is stopped during its call, so that no pick the bundle keeps
        (runners/autotune_pins.py) is timed beside a candidate's work. On the H200 the oracle's trials were 0.7 s
        of a screening (bench/results/evaluator-h200/session14/)."""
        seen = self.oracle.cache.setdefault("out_bytes", {})
        tunes = self.oracle.cache.get("autotuned") is not False or case.id not in seen
        sized = any(a.range and all(type(v) is int for v in a.range) for a in self.spec.args)  # may size outputs
        if tunes or sized or not self.concurrent:
            with self._spent("correctness.oracle"), (self._alone(self.oracle) if tunes else contextlib.nullcontext()):
                ref_reply, ref, ref_written = self._oracle_call(metas, tag, inputs)
            with self._spent("correctness.candidate"):
                calls = (ref_reply, ref, ref_written,
                         *self._candidate_call(metas, tag, ref_reply, 2 * nbytes_of(ref) + (1 << 20)))
        else:
            poison = 2 * max(seen[case.id], nbytes_of(inputs)) + (1 << 20)
            with self._spent("correctness.both"):
                self.candidate.send("call", inputs=metas, tag=tag, written=self.spec.written, pin=self.autotune,
                                    poison_bytes=poison)
                self.oracle.send("call", inputs=metas, tag=tag, written=self.spec.written, reference=False)
                ref_reply, cand_reply = self.oracle.receive(), self.candidate.receive()
                ref_reply, ref, ref_written = self._oracle_reply(ref_reply, inputs)
                calls = (ref_reply, ref, ref_written, *self._candidate_reply(cand_reply, ref_reply))
        seen[case.id] = max(seen.get(case.id, 0), nbytes_of(ref))
        self.oracle.cache["autotuned"] = bool(self.autotune) or ref_reply.get("tuners") != 0
        return calls

    def _own(self, launched: list[str]) -> list[str]:
        return [k for k in launched if k.split(":")[0] == self.package or k.startswith(self.package + ".")]

    # ---- correctness ------------------------------------------------------------------------------------
    def check_case(self, case: Case, index: int, secret: int, trials: int, result: CaseResult,
                   layouts: bool = True, masks: bool = True, first: int = 0) -> None:
        """Trials ``first`` to ``trials - 1`` of a case (trial 0: the configured distribution; later ones scaled, with
        structured rows: runners/inputs.py ``make_tensor``), then the padded layouts' and the masked trials (where
        the protocol has them and ``layouts``, ``masks``). The re-check after timing runs trial 1 alone (``first=1``),
        held to the first trial's scales."""
        tol = self.spec.tolerances_for(case.dtype)
        for trial in range(first, trials):
            # where the correctness phase goes (``correctness.*`` in the phases; the layout and masked trials as
            # wholes): on the H200 it stayed 6-10 s for RMSNorm's eight cases with every kernel compiled ahead
            with self._spent("correctness.inputs"):
                inputs = make_inputs(self.spec.args, case, self.device, trial_seed(secret, trial, index), trial)
                metas = self.exchange.write_inputs(inputs)
            ref_reply, ref, ref_written, reply, out, written = self._trial_calls(metas, f"c{index}t{trial}", inputs, case)
            self.exchange.clear()
            names = list(self.spec.written)
            both = [ref, [ref_written.get(n) for n in names]]
            with self._spent("correctness.compare"):
                if trial == 0:
                    self.first_scales[case.id] = output_scales(both)
                cmp = compare_outputs([out, [written.get(n) for n in names]], both, tol,
                                      self.first_scales[case.id] if trial else None)  # trial 0 is the scale itself
            result.trials = trial + 1
            result.max_abs_err = max(result.max_abs_err, cmp.max_abs_err)
            result.err_ratio = max(result.err_ratio, cmp.err_ratio)
            if not cmp.ok:
                raise Refusal("correctness", f"trial {trial}: {cmp.message}")
            if reply.get("modified"):
                raise Refusal("correctness", f"trial {trial}: input `{reply['modified'][0]}` was modified, but the "
                                             f"spec does not list it as written")
            if trial == first:
                result.bytes_moved = moved_bytes(inputs, ref, list(ref_written.values()), ref_reply.get("aliased"))
                result.output_scale = output_scale(ref)
                result.launched = list(reply.get("launched", []))
                result.autotune = dict(reply.get("pinned", {}))
                baseline_names = {k.split(":")[-1] for k in ref_reply.get("launched", [])}
                borrowed = [k for k in self._own(result.launched)
                            if borrowed_name(k.split(":")[-1]) and k.split(":")[-1] not in baseline_names]
                if borrowed:
                    raise Refusal("kernel", f"the candidate's kernel `{borrowed[0].split(':')[-1]}` is named as "
                                            f"torch.compile's or a library's kernels are: the profile tells kernels "
                                            f"apart by name, so its own share would count theirs "
                                            f"(tests/test_judge_attacks_round7.py); name it after what it does")
        if layouts and self.p.layout_trial:
            with self._spent("correctness.layout"):
                self._check_layout(case, index, secret, trials, tol)
        if masks and self.p.masked_trial:
            with self._spent("correctness.masked"):
                self._check_masked(case, index, secret, trials + 1, tol)
        if not self._own(result.launched) or not self.defines_kernel:
            others = ", ".join(result.launched) if self.defines_kernel else "none defined in the module"
            raise Refusal("kernel", f"the candidate launched no Triton kernel of its own (kernels launched: "
                                    f"{others}); a torch-only or borrowed computation is not an "
                                    f"optimisation of the kernel")

    def _check_layout(self, case: Case, index: int, secret: int, trial: int, tol) -> None:
        """One or two more trials, on inputs that are slices of wider ones (``row_padded``: rows padded, and for
        tensors of three or more dimensions every level): where the baseline gives the
        same answer there as on the same values laid out densely, a caller may pass such a slice (``qkv[:, :H]``,
        a strided residual), and the candidate must handle it too. A kernel that drops the baseline's stride
        arguments is right on every dense input and wrong on those (tests/test_judge_attacks_round4.py). Where
        the baseline itself refuses the layout or answers differently, nothing is asked of the candidate."""
        inputs = make_inputs(self.spec.args, case, self.device, trial_seed(secret, trial, index), trial)
        keep = set(getattr(case, "strides", {}) or {})
        gen = torch.Generator(device=self.device).manual_seed(trial_seed(secret, -1 - trial, index))  # the padding's
        # both kinds of padding at every case (runners/layouts.py padding_like): a kernel that takes the strides only
        # on one kind is wrong on the other (tests/test_judge_attacks_round6.py)
        layouts = [row_padded(inputs, keep, gen=gen, spread=False), row_padded(inputs, keep, gen=gen, spread=True),
                   row_padded(inputs, keep, every_level=True, gen=gen, spread=bool(index % 2))]
        tried = layouts_to_try([bool(changed) for _, changed in layouts], self.p.layout_trials,
                               trial_seed(secret, 75_000 + trial, index))
        if not tried:
            return
        names = list(self.spec.written)
        _, ref, ref_written = self._oracle_call(self.exchange.write_inputs(inputs), f"c{index}t{trial}d", inputs)
        self.exchange.clear()

        def same_as_dense(out, written) -> bool:
            return compare_outputs([out, [written.get(n) for n in names]], [ref, [ref_written.get(n) for n in names]],
                                   tol, self.first_scales.get(case.id)).ok

        for k in tried:
            wide, changed = layouts[k]
            shown = ", ".join(f"`{n}` {list(wide[n].shape)} with strides {list(wide[n].stride())}" for n in changed)
            self._variant_trial(wide, f"c{index}t{trial}w{k}", same_as_dense, tol, (
                f"inputs that are slices of a wider buffer ({shown})", "The baseline gives the same answer on them "
                "as on dense inputs, so a caller may pass them (`x[:, :n]` of a wider tensor, q and k split from a "
                "fused qkv): use the strides the baseline uses, or make the input contiguous"))

    def _check_masked(self, case: Case, index: int, secret: int, trial: int, tol) -> None:
        """One more trial with masked scores (``masked_rows``: a row whose first three quarters are -inf, a row
        with -inf at random places), where the baseline's outputs on them are all finite: an op that takes a mask
        that way (softmax, a logsumexp, a masked reduction) must take it in the candidate too. A one-pass softmax
        without the guard for a running maximum still at -inf is right on every finite input and NaN on a masked
        prefix (tests/test_judge_attacks_round4.py). Where the baseline's answer is not finite (a norm, an
        activation: -inf in, NaN out), nothing is asked of the candidate."""
        inputs = make_inputs(self.spec.args, case, self.device, trial_seed(secret, trial, index), trial)
        gen = torch.Generator().manual_seed(trial_seed(secret, trial + 1, index))
        masked, changed = masked_rows(inputs, gen, keep=set(getattr(case, "strides", {}) or {}))
        if not changed:
            return
        names = list(self.spec.written)

        def finite(out, written) -> bool:
            tensors = [t for t in flatten([out, [written.get(n) for n in names]]) if isinstance(t, torch.Tensor)]
            return all(bool(torch.isfinite(t.float()).all()) for t in tensors if t.dtype.is_floating_point)

        if not self._variant_trial(masked, f"c{index}t{trial}m", finite, tol, (
                f"masked rows (-inf over the first 3/4 of a row of {', '.join(f'`{n}`' for n in changed)}, and at "
                f"random places of another)", "The baseline gives finite outputs on them, so a caller may mask that "
                "way: keep a running maximum that is still -inf from turning into NaN")):
            return
        # an op that takes -inf masks takes additive ones too, padding rows wholly masked included (round 17). A row of
        # one value ties everywhere, so not where the baseline returns indices (round 18: an honest top-2 breaking
        # ties the other way was refused)
        gen = torch.Generator().manual_seed(trial_seed(secret, 85_000 + trial, index))
        lowest, changed = masked_rows(inputs, gen, keep=set(getattr(case, "strides", {}) or {}), lowest=True)
        self._variant_trial(lowest, f"c{index}t{trial}l", lambda out, w: finite(out, w) and all(
            t.dtype.is_floating_point for t in flatten([out, list(w.values())]) if isinstance(t, torch.Tensor)), tol, (
            f"rows of {', '.join(f'`{n}`' for n in changed)} masked with a large finite negative value (one "
            f"wholly, others over parts)", "The baseline gives finite outputs on them (a row whose every score is "
            "masked gets its answer too), so a caller may mask that way: keep rows all of whose scores are masked"))

    def _variant_trial(self, inputs: dict, tag: str, baseline_takes, tol, explain: tuple[str, str]) -> bool:
        """The oracle, then the candidate, on ``inputs``; asked of the candidate only where the oracle answers and
        ``baseline_takes(out, written)`` (returns whether it was asked). A padded input travels with its whole storage
        (runners/wire.py), its padding the judge's draws: both workers get the same bytes, under a header like any
        other input's."""
        names = list(self.spec.written)
        metas = self.exchange.write_inputs(inputs)
        try:
            ref_reply, ref, ref_written = self._oracle_call(metas, tag, inputs)
        except Refusal:
            self.exchange.clear()
            return False  # the baseline does not take these inputs: neither need the candidate
        if not baseline_takes(ref, ref_written):
            self.exchange.clear()
            return False
        poison = 2 * nbytes_of(ref) + (1 << 20)
        reply, out, written = self._candidate_call(metas, tag, ref_reply, poison)
        self.exchange.clear()
        what, why = explain
        if reply.get("modified"):
            raise Refusal("correctness", f"{what}: input `{reply['modified'][0]}` was modified, but the spec does "
                                         f"not list it as written")
        cmp = compare_outputs([out, [written.get(n) for n in names]], [ref, [ref_written.get(n) for n in names]], tol)
        if not cmp.ok:
            raise Refusal("correctness", f"{what}: {cmp.message}. {why}")
        return True


# the order of the steps, re-exported: runners.judge is where the sandbox and the tests find the protocol
from .judge_steps import claimed_faster, evaluate, profiled_cases, recheck  # noqa: E402, F401
