"""Which Triton kernels a call launched, and the autotuners of a kernel module.

Both run inside a worker. In the candidate's worker they are evidence, not proof: the judge uses them to
refuse a candidate that launches no kernel of its own (a torch-only "kernel"), and to pin the oracle's
autotuned configs on the candidate's copy of the same autotuner, so that both sides run the same config.
"""
from __future__ import annotations

import functools
import threading
from types import ModuleType

from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction

_RECORD: list | None = None
_TUNED: list | None = None  # the launches inside a Recorder that went through an autotuner (any module)
_THREADS: set | None = None  # the threads that launched inside a Recorder


def _hooked(run, sink: str, marker: str):
    """``run`` appending (module, name) of the launched function to the list named ``sink`` (``_RECORD``, ``_TUNED``)
    while a Recorder is open; Triton's compile-only warm-ups are not launches. Appended once ``run`` has returned, in
    the order the launches happened: ``run`` evaluates a callable grid before it launches, and a grid that launched
    another kernel was recorded after the kernel whose grid it was (runners/kernel_share.py matches the record to the
    device's events in launch order: round 26). From one thread only: return order is launch order there, and the
    launching threads are kept (``Recorder.threads``) so that launches from several are not matched by order (round
    28's C: a launch held in its ``run`` by another thread's later one)."""
    @functools.wraps(run)
    def wrapper(self, *args, **kwargs):
        out = run(self, *args, **kwargs)
        into, threads = globals()[sink], _THREADS
        if into is not None and not kwargs.get("warmup", False):
            fn = getattr(self, "fn", None)
            into.append((getattr(fn, "__module__", "?"), getattr(fn, "__name__", "?")))
            if threads is not None:
                threads.add(threading.get_ident())
        return out

    setattr(wrapper, marker, True)
    return wrapper


def install() -> None:
    """Record every launch of a ``@triton.jit`` function (compiled or interpreted). Call before any kernel
    module is imported."""
    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - older Triton
        pass
    for cls in classes:
        if not getattr(cls.run, "__ks_recording__", False):
            cls.run = _hooked(cls.run, "_RECORD", "__ks_recording__")
    if not getattr(Autotuner.run, "__ks_tuning__", False):  # a launch through an autotuner, whatever module it is in
        Autotuner.run = _hooked(Autotuner.run, "_TUNED", "__ks_tuning__")


class Recorder:
    """``with Recorder() as launched:`` collects (module, kernel name) of each launch inside the block, and in
    ``tuned`` the launches that went through an ``@triton.autotune`` (whatever module it is in), in ``threads`` the
    threads that launched."""

    def __enter__(self) -> list:
        global _RECORD, _TUNED, _THREADS
        self.launched: list = []
        self.tuned: list = []
        self.threads: set = set()
        _RECORD, _TUNED, _THREADS = self.launched, self.tuned, self.threads
        return self.launched

    def __exit__(self, *exc) -> None:
        global _RECORD, _TUNED, _THREADS
        _RECORD, _TUNED, _THREADS = None, None, None


def autotuners(module: ModuleType) -> dict[str, Autotuner]:
    """Module-level autotuned kernels by name (an Autotuner may sit under ``triton.heuristics``)."""
    found = {}
    for name, value in vars(module).items():
        obj, depth = value, 0
        while obj is not None and depth < 4:
            if isinstance(obj, Autotuner):
                found[name] = obj
                break
            obj, depth = getattr(obj, "fn", None), depth + 1
    return found


def config_names(tuner: Autotuner) -> list[str]:
    return [str(c) for c in tuner.configs]


def pin_first_config(module: ModuleType) -> None:
    """On the CPU interpreter autotuning cannot benchmark: both sides run the first config."""
    for tuner in autotuners(module).values():
        tuner.configs = tuner.configs[:1]


def autotune_state(module: ModuleType) -> dict:
    """What the autotuners chose so far: {kernel: {"configs": [...], "chosen": [[key, config], ...]}}."""
    state = {}
    for name, tuner in autotuners(module).items():
        state[name] = {"configs": config_names(tuner), "key": list(tuner.keys),
                       "chosen": [[list(k), str(c)] for k, c in tuner.cache.items()]}
    return state


def pin(module: ModuleType, state: dict) -> dict:
    """Give the candidate's autotuners the oracle's choices where their config lists are the same (in any order).

    Returns {kernel: "pinned" | "own configs" | "own key"} for the report: a candidate that changed the key
    (re-keyed) autotunes at keys the oracle never saw, so it runs its own choices there."""
    outcome = {}
    for name, tuner in autotuners(module).items():
        theirs = state.get(name)
        # the same configs in another order are the same list (a reordered copy autotuned on its own and was
        # credited whatever the oracle's own pick had lost to noise: round 8's review)
        if not theirs or sorted(theirs.get("configs") or []) != sorted(config_names(tuner)):
            outcome[name] = "own configs"
            continue
        if theirs.get("key") is not None and list(theirs["key"]) != list(tuner.keys):
            outcome[name] = "own key"
            continue
        by_name = {str(c): c for c in tuner.configs}
        for key, config in theirs.get("chosen", []):
            if config in by_name:
                tuner.cache[tuple(key)] = by_name[config]
        outcome[name] = "pinned"
    return outcome
