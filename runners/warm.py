"""Compiling a candidate's kernels before its turn, without running them (the search's pipeline).

The warm spare (runners/sandbox.py) loads the next candidate while the current one is judged, and is asked to
call the entry once per case with every Triton launch turned into Triton's own warm-up: the kernel is
specialised and compiled for those arguments and put in its cache, and none of the candidate's kernels runs on the
device. Each compiled kernel is also loaded (its module on the device, its launcher built: what Triton does at a
kernel's first launch in a process), and the worker's own commitment kernels (runners/commitments.py) hash the empty
inputs and outputs once, a few microseconds of the device: on the H200 a fresh candidate's process spent 0.6 s of
its trials' calls and 0.85 s of their commitments on these first uses, which the long-lived oracle does not pay
(sixteenth session). When the candidate's turn comes, its correctness trials find their kernels compiled and loaded
(Triton's compiles were most of a search evaluation's correctness phase on the H200).

This is a speed-up only, and it runs in the candidate's interpreter: nothing here is trusted or checked. A
candidate that ignores it, or does other work meanwhile, changes nothing the judge decides. Its inputs are
empty tensors of the cases' shapes, dtypes and layouts (no values: nothing to learn), and the held-out cases
are never sent.
"""
from __future__ import annotations

import functools
import time

import torch
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction

from .inputs import RANGE_VALUES, SlotBank
from .layouts import warm_layouts
from .task import ArgSpec, Case

_COMPILE_ONLY = False


def _jit_run(run):
    @functools.wraps(run)
    def wrapper(self, *args, **kwargs):
        if not _COMPILE_ONLY:
            return run(self, *args, **kwargs)
        kwargs["warmup"] = True  # specialise and compile; no launch
        kernel = run(self, *args, **kwargs)
        _load(kernel)
        return kernel

    wrapper.__ks_warm__ = True
    return wrapper


def _tuner_run(run):
    @functools.wraps(run)
    def wrapper(self, *args, **kwargs):
        if not _COMPILE_ONLY:
            return run(self, *args, **kwargs)
        # every config the tuner would benchmark, compiled; nothing benchmarked and nothing chosen (a choice made on
        # kernels that did not run would be noise, and the judge pins the oracle's choices anyway)
        self.nargs = dict(zip(self.arg_names, args))
        try:
            configs = self.prune_configs(kwargs) if len(self.configs) > 1 else self.configs
            for config in configs:
                try:
                    self.fn.run(*args, **kwargs, **config.all_kwargs())
                except Exception:  # noqa: BLE001 - a config that does not compile is the tuner's to skip later
                    pass
        finally:
            self.nargs = None
        return None

    wrapper.__ks_warm__ = True
    return wrapper


def _load(kernel) -> None:
    """What a compiled kernel's first launch does besides running: its binary loaded on the device, its launcher
    made (Triton's ``CompiledKernel._init_handles``; nothing runs). Where this Triton has no such step, or the kernel
    cannot be loaded (too much shared memory, say), the first launch meets it again and reports it."""
    init = getattr(kernel, "_init_handles", None)
    if callable(init):
        try:
            init()
        except Exception:  # noqa: BLE001 - the trials meet it again, with real inputs
            pass


def _hash_once(values) -> int:
    """The worker's commitments over ``values`` (a call's inputs or outputs, empty tensors here): their kernels'
    first use in this process, paid before the candidate's turn. Returns how many tensors were hashed."""
    from .commitments import commitments
    from .compare import flatten

    tensors = [t for t in flatten(values) if isinstance(t, torch.Tensor)]
    for t in tensors:
        try:
            commitments([t])
        except Exception:  # noqa: BLE001 - a speed-up only
            pass
    return len(tensors)


def install() -> None:
    """Put the compile-only switch on Triton's launch paths (once, before the kernel module is imported)."""
    if not getattr(JITFunction.run, "__ks_warm__", False):
        JITFunction.run = _jit_run(JITFunction.run)
    if not getattr(Autotuner.run, "__ks_warm__", False):
        Autotuner.run = _tuner_run(Autotuner.run)


def warm(fn, args: list[ArgSpec], cases: list[Case], device: str, budget_s: float = 120.0) -> dict:
    """Call ``fn`` on empty inputs of every case (each value a range scalar takes in the judge's slots, and the layout
    trial's classes of padded rows: runners/layouts.py ``warm_layouts``) with launches compiled only. Returns what
    was tried; errors are expected (a wrapper that reads its outputs, say) and only counted: the correctness trials
    meet them again, with real inputs, and report them."""
    global _COMPILE_ONLY
    started = time.perf_counter()
    calls, errors, hashes = 0, [], 0
    _COMPILE_ONLY = True
    try:
        for case in cases:
            if time.perf_counter() - started > budget_s:
                break
            ranged = any(a.range and not a.is_tensor and a.name not in getattr(case, "values", {}) for a in args)
            try:
                bank = SlotBank(args, case, device, RANGE_VALUES if ranged else 1)
            except Exception as exc:  # noqa: BLE001 - too large to hold, say: the trials will compile it
                errors.append(f"{case.id}: {type(exc).__name__}")
                continue
            seen = set()
            for slot in bank.slots:
                scalars = tuple(sorted((k, repr(v)) for k, v in slot.items() if not isinstance(v, torch.Tensor)))
                if scalars in seen:
                    continue
                seen.add(scalars)
                calls += 1
                try:
                    out = fn(**slot)
                    if len(seen) == 1 and device == "cuda":  # the commitments' kernels at this case's sizes,
                        _COMPILE_ONLY = False  # launched for real
                        try:
                            hashes += _hash_once(list(slot.values())) + _hash_once(out)
                        finally:
                            _COMPILE_ONLY = True
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"{case.id}: {type(exc).__name__}: {str(exc)[:120]}")
            # the layout trial's padded rows: their strides are new specialisations of every kernel that takes them
            for variant in warm_layouts(bank.slots[0], set(getattr(case, "strides", {}) or {})):
                calls += 1
                try:
                    fn(**variant)
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"{case.id} (padded rows): {type(exc).__name__}: {str(exc)[:120]}")
            del bank
    finally:
        _COMPILE_ONLY = False
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return {"ok": True, "calls": calls, "errors": errors[:5], "error_count": len(errors), "hashed": hashes,
            "seconds": time.perf_counter() - started}
