"""Warm a worker before its kernel arrives: the modules the baseline imports from outside its own files (the
target's host package, its dependencies) are imported while the worker waits as the spare, during the
evaluation before, instead of on the evaluation's critical path.

On the H200 a candidate worker spent 8-12 s of every Liger-Kernel evaluation importing ``liger_kernel`` (whose
package imports every op and HuggingFace ``transformers``) before its kernel could run
(bench/results/liger-kernel-h200/). What is imported here is what the candidate's own import would reach anyway,
in the candidate's own process: nothing of the judge and nothing trusted. A module that fails here is left for
the kernel's import to report.

On a GPU the worker also makes its device context and starts the profiler once (CUPTI's first start costs about a
second) here, in trusted code before any kernel arrives: the oracle and every candidate then come to their timing
and their profile in the same state. A spare that is still warming while another candidate is timed is paused
with the other bystanders (runners/alone.py ``_alone``).
"""
from __future__ import annotations

import ast
import importlib
import json
import os
import sys
import time

from .syntax import parse

ENV = "KS_PRELOAD"


def host_imports(source: str, own: tuple[str, ...] = ()) -> list[str]:
    """Absolute modules the source imports at its top level (``import a.b``, ``from a.b import c``), in order,
    without ``__future__`` and the packages named in ``own`` (the bundle's copies, which are the candidate's);
    only those before the first other statement (a ``sys.path`` or ``os.environ`` line may change what a later
    import finds)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return []
    names: list[str] = []
    for position, node in enumerate(tree.body):
        if isinstance(node, ast.Import):
            found = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found = [node.module] if node.level == 0 and node.module else []
        elif position == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module's docstring
        else:
            break
        for name in found:
            if name != "__future__" and name.split(".")[0] not in own and name not in names:
                names.append(name)
    return names


def encode(import_paths: list[str], modules: list[str], interpret: bool, device: str | None = None) -> str:
    return json.dumps({"import_paths": list(import_paths), "modules": modules, "interpret": interpret,
                       "device": device})


def warm_device() -> float:
    """The CUDA context and the profiler's first start, before the worker says it is ready. Returns seconds."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    started = time.perf_counter()
    probe = torch.zeros(1, device="cuda")
    probe.add_(1)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]):
        probe.add_(1)
        torch.cuda.synchronize()
    return time.perf_counter() - started


def run_from_env() -> dict:
    """In the worker, before it says it is ready: import what ``KS_PRELOAD`` names. Returns what was imported
    and what failed (with the reason), for the worker's log."""
    raw = os.environ.pop(ENV, "")
    if not raw:
        return {}
    job = json.loads(raw)
    for path in reversed(job.get("import_paths") or []):
        if path not in sys.path:
            sys.path.insert(0, path)
    from . import interpreter_shims, launches

    if job.get("interpret"):
        interpreter_shims.install()
    launches.install()
    started, done, failed = time.perf_counter(), [], {}
    for name in job.get("modules") or []:
        try:
            importlib.import_module(name)
            done.append(name)
        except BaseException as exc:  # noqa: BLE001 - the kernel's own import reports it, with its traceback
            failed[name] = f"{type(exc).__name__}: {exc}"[:300]
    out = {"preloaded": done, "failed": failed, "seconds": round(time.perf_counter() - started, 3)}
    if job.get("device") == "cuda":
        try:
            out["device_warm_s"] = round(warm_device(), 3)
        except Exception as exc:  # noqa: BLE001 - the probe and the first call report a device that does not work
            out["device_warm_failed"] = f"{type(exc).__name__}: {exc}"[:300]
    return out
