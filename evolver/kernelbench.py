"""KernelBench-format tasks (a torch ``Model``, ``get_inputs()``, ``get_init_inputs()``) run with the same
protocol as a repository kernel, and reported like the paper: correctness rate, fast_1 and AMSR per level.

A task file becomes a bundle whose module is the task file itself, its body inside an EVOLVE region, plus a
fixed entry outside the region that builds ``Model(*get_init_inputs())`` once per device with seeded
weights and calls it. The original module is the oracle; a candidate rewrites the region (keeping the names
``Model`` and ``get_init_inputs`` and the parameter order) and must launch a Triton kernel of its own.
Task files are the user's own input and are executed (on the meta device) to read the input shapes.
"""
from __future__ import annotations

import json
import logging
import math
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from .candidate import Candidate
from .edits import END, START
from .engine import EngineOptions, new_archive, run_search

log = logging.getLogger("kernelsmith")
ENTRY = "kernelbench_entry"
TOLERANCE = 1e-2  # KernelBench's atol and rtol


@dataclass
class KBTask:
    name: str
    level: str
    source: str
    inputs: list[dict]  # {"shape": [...], "dtype": "float32"} or {"value": 3}


def task_files(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        p = Path(p)
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return [p for p in out if p.name != "__init__.py"]


def load_task(path: Path) -> KBTask:
    import torch

    source = Path(path).read_text()
    namespace: dict = {"__name__": f"kernelbench_{Path(path).stem}"}
    with torch.device("meta"):
        exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 - the user's own task file
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if name not in namespace:
                raise ValueError(f"{path} is not a KernelBench task: it defines no `{name}`")
        inputs = []
        for x in namespace["get_inputs"]():
            if isinstance(x, torch.Tensor):
                inputs.append({"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")})
            else:
                inputs.append({"value": x})
    level = next((part for part in Path(path).resolve().parts[::-1] if re.fullmatch(r"level\d+", part)), "level?")
    name = re.sub(r"\W", "_", Path(path).stem)
    name = name if not name[0].isdigit() else "task_" + name
    return KBTask(name, level, source, inputs)


def module_source(task: KBTask) -> str:
    """The task file with its body in the EVOLVE region and the fixed entry after it."""
    lines = task.source.rstrip().splitlines()
    head = 0
    while head < len(lines) and (lines[head].startswith(("import ", "from ")) or not lines[head].strip()):
        head += 1
    args = ", ".join(f"x{i}" for i in range(len(task.inputs)))
    first = "x0" if task.inputs and "shape" in task.inputs[0] else "None"
    return "\n".join([
        *lines[:head], START, *lines[head:], END, "",
        "_MODELS = {}", "", "",
        f"def {ENTRY}({args}):",
        '    """Build the model once per device, with seeded weights, and run it."""',
        f"    device = {first}.device if {first} is not None else torch.device('cpu')",
        "    model = _MODELS.get(str(device))",
        "    if model is None:",
        "        with torch.random.fork_rng(devices=[]):",
        "            torch.manual_seed(0)",
        "            model = Model(*get_init_inputs()).to(device)",
        "        _MODELS[str(device)] = model",
        "    with torch.no_grad():",
        f"        return model({args})", ""])


def build_bundle(task: KBTask, dest: Path):
    from runners.task import REFERENCE_DIR, ArgSpec, Case, TaskSpec, Tolerance, write_task

    module = f"{task.name}.py"
    for folder in ("baseline", REFERENCE_DIR):  # the task's torch Model is also the reference torch.compile seeds
        (dest / folder).mkdir(parents=True, exist_ok=True)
        (dest / folder / module).write_text(module_source(task))
    args = [ArgSpec(name=f"x{i}", shape=inp["shape"], dtype=inp["dtype"]) if "shape" in inp
            else ArgSpec(name=f"x{i}", value=inp["value"]) for i, inp in enumerate(task.inputs)]
    spec = TaskSpec(kernel=task.name, module=module, entry=ENTRY, args=args,
                    cases=[Case(symbols={}, dtype="float32")],
                    tolerances={"float32": Tolerance(TOLERANCE, TOLERANCE)}, files=[module],
                    reference=f"{module}:{ENTRY}")
    write_task(dest, spec)
    return spec


def _task_result(archive, task: KBTask) -> dict:
    made = [c for c in archive.candidates if c.id != 0 and c.evaluation is not None]
    correct = [c for c in made if c.correct]
    timed = [c.fitness for c in correct if c.fitness is not None]
    best = max(timed) if timed else None
    return {"task": task.name, "level": task.level, "candidates": len(made), "correct": bool(correct),
            "speedup": best, "timed": bool(timed) or not correct}


def summarize(results: list[dict]) -> dict:
    levels: dict[str, dict] = {}
    for level in sorted({r["level"] for r in results}):
        rows = [r for r in results if r["level"] == level]
        timed = all(r["timed"] for r in rows)
        speedups = [(r["speedup"] or 0.0) if r["correct"] else 0.0 for r in rows]
        levels[level] = {
            "tasks": len(rows), "correctness_rate": sum(r["correct"] for r in rows) / len(rows),
            "fast_1": sum(1 for s in speedups if s > 1.0) / len(rows) if timed else None,
            "amsr": sum(s if s >= 1.0 else 0.0 for s in speedups) / len(rows) if timed else None,
            "geomean_correct": math.exp(sum(math.log(s) for s in speedups if s > 0) /
                                        max(1, sum(1 for s in speedups if s > 0))) if timed and any(speedups)
            else None}
    return {"levels": levels, "tasks": results}


def run_kernelbench(paths: list[Path], out: Path, backend: str, models: Path | None, preset: str | None,
                    budget: int, seed: int, timeout: float = 300.0, trials: int = 3) -> dict:
    from runners.sandbox import Evaluator

    files = task_files(paths)
    if not files:
        raise ValueError("no KernelBench task files found")
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for path in files:
        task = load_task(path)
        run_dir = out / task.level / task.name
        run_dir.mkdir(parents=True, exist_ok=True)
        build_bundle(task, run_dir / "bundle")
        opts = EngineOptions(budget=budget, models=models, preset=preset,
                             operators=["rewrite"] if models else ["tuner"], job={"kernel": task.name})
        with Evaluator(run_dir / "bundle", backend, timeout=timeout, trials=trials) as evaluator:
            baseline = Candidate(0, evaluator.baseline, "baseline")
            baseline.evaluation = evaluator.evaluate(baseline.source, secrets.randbits(62))
            archive = new_archive(opts)
            engine = run_search(evaluator, baseline, opts, run_dir, seed, archive=archive)
            engine.store.close()
        results.append(_task_result(archive, task))
        log.info("%s/%s: %s", task.level, task.name, results[-1])
    summary = summarize(results)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
