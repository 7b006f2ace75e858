"""The evaluation worker: runs inside a spawned child process (``python -m runners.worker``).

It imports torch and Triton at start (so a spare worker can wait warm), then reads one job as a JSON line
on stdin, evaluates the candidate against the baseline, and writes the Evaluation as JSON to the private
pipe named by ``KS_RESULT_FD``. Everything the candidate could tamper with (seeds, oracle outputs, timers)
lives here, out of its reach: the static policy has already refused sources that reach for them.
"""
from __future__ import annotations

import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import triton

from .compare import compare_outputs, flatten, inputs_unchanged
from .inputs import clone_inputs, make_inputs
from .integrity import snapshot, tampered
from .results import CaseResult, Environment, Evaluation
from .task import BASELINE_DIR, Case, TaskSpec, read_task

MAX_PLAUSIBLE_SPEEDUP = 10.0  # above this the result is quarantined for a human to look at
HARNESS_MODULES = ("compare", "inputs", "task", "results", "timing", "integrity")


def environment(backend: str) -> Environment:
    env = Environment(backend=backend, device="cpu (Triton interpreter)", torch=torch.__version__,
                      triton=triton.__version__, python=platform.python_version())
    if backend == "triton":
        env.device = torch.cuda.get_device_name()
        env.cuda = torch.version.cuda or torch.version.hip
        try:
            env.driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True, timeout=20).stdout.split("\n")[0].strip() or None
        except (OSError, subprocess.SubprocessError):
            env.driver = None
    return env


def materialize(bundle: Path, spec: TaskSpec, dest: Path, package: str, source: str | None) -> str:
    """Copy baseline/ under a top-level ``package`` (with the kernel module replaced by ``source``).

    Returns the dotted name of the kernel module there.
    """
    root = dest / package
    shutil.copytree(bundle / BASELINE_DIR, root)
    if source is not None:
        (root / spec.module).write_text(source)
    for d in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    return ".".join([package, *Path(spec.module).with_suffix("").parts])


def _short_traceback(exc: BaseException, limit: int = 12) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines)
    tail = text.strip().splitlines()[-limit:]
    return "\n".join(tail)


def _is_compile_error(exc: BaseException) -> bool:
    # Triton raises CompilationError on a GPU; the interpreter wraps the same mistakes in InterpreterError.
    return any("Compil" in cls.__name__ or cls.__name__ == "InterpreterError" for cls in type(exc).__mro__)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _poison_allocator(device: str, nbytes: int) -> None:
    """Fill memory the caching allocator will hand out next with NaN bytes, so unwritten outputs show."""
    if device == "cuda":  # freed at once: the next allocations of that size come from this block
        torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(0xFF)


def _trial_seed(secret: int, trial: int, case_index: int) -> int:
    return (secret * 1_000_003 + trial * 7919 + case_index) % (2**63)


def check_case(spec: TaskSpec, case: Case, index: int, base_fn, cand_fn, device: str, secret: int,
               trials: int) -> tuple[CaseResult, str]:
    """Correctness of one case over ``trials`` fresh inputs. Returns the result and the failing stage."""
    result = CaseResult(case=case.id)
    tol = spec.tolerance(case.dtype)
    for trial in range(trials):
        inputs = make_inputs(spec.args, case, device, _trial_seed(secret, trial, index))
        ref_in = clone_inputs(inputs)
        ref = base_fn(**ref_in)
        _sync(device)
        cand_in = clone_inputs(inputs)
        nbytes = sum(t.numel() * t.element_size() for t in flatten(ref) if isinstance(t, torch.Tensor))
        _poison_allocator(device, 2 * nbytes + (1 << 20))
        try:
            out = cand_fn(**cand_in)
            _sync(device)
        except Exception as exc:  # noqa: BLE001 - a candidate may raise anything
            stage = "compile" if _is_compile_error(exc) else "correctness"
            result.message = f"raised {type(exc).__name__}:\n{_short_traceback(exc)}"
            return result, stage
        written_out = [cand_in[n] for n in spec.written if n in cand_in]
        written_ref = [ref_in[n] for n in spec.written if n in ref_in]
        cmp = compare_outputs([out, written_out], [ref, written_ref], tol)
        changed = inputs_unchanged(inputs, cand_in, spec.written)
        result.trials = trial + 1
        result.max_abs_err = max(result.max_abs_err, cmp.max_abs_err)
        result.err_ratio = max(result.err_ratio, cmp.err_ratio)
        if not cmp.ok or changed:
            result.message = f"trial {trial}: {cmp.message or changed}"
            return result, "correctness"
    result.correct = True
    return result, ""


def time_case(spec: TaskSpec, case: Case, index: int, result: CaseResult, base_fn, cand_fn, secret: int,
              peak_gbs: float, l2_bytes: int) -> tuple[str, str]:
    """Interleaved device timing of one case; returns (failed stage, reason), or ('', '')."""
    from .timing import host_overhead_us, time_interleaved

    # Value sets for the same input tensors: two to alternate while sampling, one for the final check.
    sets = [make_inputs(spec.args, case, "cuda", _trial_seed(secret, 10_000 + k, index)) for k in range(3)]
    base_in, cand_in = clone_inputs(sets[0]), clone_inputs(sets[0])

    def refill(k: int) -> None:
        for name, value in sets[k % len(sets)].items():
            if isinstance(value, torch.Tensor):
                base_in[name].copy_(value)
                cand_in[name].copy_(value)

    tb, tc = time_interleaved([lambda: base_fn(**base_in), lambda: cand_fn(**cand_in)], lambda k: refill(k % 2))
    # The work that was timed must be the work that is correct: new values behind the same pointers, one more
    # timed run of each, and the outputs compared. Work skipped at capture, or answers remembered from earlier
    # calls, cannot match.
    refill(2)
    tb.run()
    tc.run()
    torch.cuda.synchronize()
    cmp = compare_outputs(tc.outputs, tb.outputs, spec.tolerance(case.dtype))
    if not cmp.ok:
        return "timing", f"{case.id}: outputs of the timed calls are wrong ({cmp.message})"
    result.baseline_us, result.candidate_us = tb.median_us, tc.median_us
    result.baseline_spread, result.candidate_spread = tb.spread, tc.spread
    result.timing_method = tc.method if tb.method == tc.method else f"{tb.method}/{tc.method}"
    result.baseline_host_us = host_overhead_us(lambda: base_fn(**base_in))
    result.candidate_host_us = host_overhead_us(lambda: cand_fn(**cand_in))
    tensors = [v for v in sets[0].values() if isinstance(v, torch.Tensor)]
    tensors += [t for t in flatten(tb.outputs) if isinstance(t, torch.Tensor)]
    result.bytes_moved = sum(t.numel() * t.element_size() for t in tensors)
    result.bandwidth_gbs = result.bytes_moved / (tc.median_us * 1e-6) / 1e9
    reason = implausible(result, peak_gbs, l2_bytes)
    return ("plausibility", f"quarantined: {reason}") if reason else ("", "")


def implausible(result: CaseResult, peak_gbs: float, l2_bytes: int,
                max_speedup: float = MAX_PLAUSIBLE_SPEEDUP) -> str:
    """Why a timed result is too good to be believed ('' when it is plausible).

    Effective bandwidth is only held against the measured DRAM peak when the data cannot sit in L2:
    repeated calls on L2-resident inputs legitimately beat DRAM bandwidth.
    """
    if result.speedup and result.speedup > max_speedup:
        return f"{result.case}: speedup {result.speedup:.1f}x is above the plausibility bound {max_speedup:g}x"
    if result.bytes_moved and result.bytes_moved > l2_bytes and result.bandwidth_gbs > 1.1 * peak_gbs:
        return (f"{result.case}: effective bandwidth {result.bandwidth_gbs:.0f} GB/s is above the measured "
                f"peak {peak_gbs:.0f} GB/s")
    return ""


def evaluate(job: dict) -> Evaluation:
    started = time.perf_counter()
    backend = job["backend"]
    device = "cuda" if backend == "triton" else "cpu"
    bundle = Path(job["bundle"])
    spec = read_task(bundle)
    ev = Evaluation(stage="compile", env=environment(backend))
    cases = spec.held_out if job.get("case_set") == "held_out" else spec.cases
    workdir = Path(tempfile.mkdtemp(prefix="ks-eval-", dir=job.get("workdir")))
    try:
        sys.path.insert(0, str(workdir))
        base_name = materialize(bundle, spec, workdir, "ks_baseline", None)
        cand_name = materialize(bundle, spec, workdir, "ks_candidate", job["source"])
        base_fn = getattr(importlib.import_module(base_name), spec.entry)
        if device == "cuda":
            torch.cuda.init()  # lazy initialisation must not look like tampering
        harness = [sys.modules[__name__], *(importlib.import_module(f"{__package__}.{m}") for m in HARNESS_MODULES)]
        untouched = snapshot(harness)

        def check_integrity(when: str) -> bool:
            changed = tampered(untouched, harness)
            if changed:
                ev.stage = "policy"
                ev.error = f"the candidate replaced {', '.join(changed[:5])} ({when}): monkey-patching is not allowed"
            return not changed

        try:
            cand_fn = getattr(importlib.import_module(cand_name), spec.entry)
        except Exception as exc:  # noqa: BLE001
            ev.error = f"import failed: {type(exc).__name__}: {exc}\n{_short_traceback(exc)}"
            return ev
        if not check_integrity("on import"):
            return ev
        ev.stage = "correctness"
        secret = int(job["seed"])
        for index, case in enumerate(cases):
            result, failed = check_case(spec, case, index, base_fn, cand_fn, device, secret, int(job["trials"]))
            ev.cases.append(result)
            if not check_integrity(f"while running {case.id}"):
                return ev
            if failed:
                ev.stage, ev.error = failed, f"{case.id}: {result.message}"
                return ev
        if job.get("time") and backend == "triton":
            from .timing import copy_bandwidth_gbs

            ev.stage = "timing"
            peak = copy_bandwidth_gbs()
            ev.env.peak_bandwidth_gbs = peak
            l2 = torch.cuda.get_device_properties(0).L2_cache_size
            for index, (case, result) in enumerate(zip(cases, ev.cases)):
                failed, reason = time_case(spec, case, index, result, base_fn, cand_fn, secret, peak, l2)
                if not check_integrity(f"while timing {case.id}"):
                    return ev
                if failed:
                    ev.stage, ev.error = failed, reason
                    return ev
            # A candidate that behaves while checked and cuts corners once the calls pile up is caught here.
            for index, case in enumerate(cases):
                again, failed = check_case(spec, case, index, base_fn, cand_fn, device, secret + 1, 1)
                if failed:
                    ev.stage, ev.error = "timing", f"{case.id}: wrong after timing: {again.message}"
                    return ev
            ev.timed = True
        elif backend != "triton":
            ev.notes.append("not timed: the Triton CPU interpreter runs kernels as numpy on the host; "
                            "its times say nothing about GPU speed")
        ev.stage, ev.ok = "done", True
        return ev
    except Exception as exc:  # noqa: BLE001 - the baseline or the harness itself failed
        ev.error = f"harness error: {type(exc).__name__}: {exc}\n{_short_traceback(exc)}"
        ev.notes.append("harness-error")
        return ev
    finally:
        ev.duration_s = time.perf_counter() - started
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    result_fd = int(os.environ.pop("KS_RESULT_FD"))
    line = sys.stdin.readline()
    if not line:
        return  # a spare that was never used
    job = json.loads(line)
    token = job.pop("token")  # the parent accepts only a verdict that carries it
    evaluation = evaluate(job)
    with os.fdopen(result_fd, "w") as out:
        json.dump({"token": token, "evaluation": evaluation.to_dict()}, out)


if __name__ == "__main__":
    main()
