"""The Triton code torch.compile (inductor) generates for the config's torch reference, offered to the LLM
operators as an inspiration (in the static part of every prompt) and as a seed (a first rewrite on each
island asks the model to port it into the module).

Inductor emits Triton only for a CUDA device, so the code is generated on a GPU machine, in a subprocess
(evolver/inductor_capture.py), with a deadline. It cannot be a candidate as it is: it imports inductor's
runtime (refused by the judge's policy) and hard-codes one case's sizes. Nothing here may stop a run: every
failure becomes ``InductorCode(available=False, reason=...)``, which the prompt states honestly.
"""
from __future__ import annotations

import ast
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runners.task import REFERENCE_DIR
from runners.syntax import parse

log = logging.getLogger("kernelsmith")
PROJECT_ROOT = Path(__file__).resolve().parent.parent
GPU_BACKENDS = ("triton", "maca")  # torch sees the device as "cuda" on both
SEED = "torch.compile"  # genome["seed"] of a candidate that ported the generated code
# Inductor's helpers and what plain Triton offers instead (for the model; the policy refuses the helpers).
HELPERS = {"triton_helpers.max2": "tl.max", "triton_helpers.min2": "tl.min", "triton_helpers.maximum": "tl.maximum",
           "triton_helpers.minimum": "tl.minimum",
           "libdevice.": "tl math (tl.rsqrt, tl.exp, ...) or triton.language.extra.libdevice",
           "tl_math.": "tl.* (tl.exp, tl.log, tl.abs, ...)", "triton_helpers.welford": "a two-pass or Welford loop"}


@dataclass
class Kernel:
    name: str
    source: str  # the @triton.jit function, inductor's autotuning decorator removed
    helpers: list[str] = field(default_factory=list)  # inductor helpers it calls


@dataclass
class InductorCode:
    available: bool
    reason: str = ""  # why there is none
    reference: str = ""  # file.py:function
    case: str = ""  # the case the code was generated (and specialised) for
    device: str = ""
    kernels: list[Kernel] = field(default_factory=list)
    launcher: str = ""  # inductor's call(): buffers and launches, asserts removed

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> InductorCode:
        return cls(**{**data, "kernels": [Kernel(**k) for k in data.get("kernels", [])]})

    def prompt_text(self, limit: int = 6000) -> str:
        """The kernels and the launch, cut to ``limit`` characters (the first kernels are kept whole)."""
        parts, used = [], 0
        for k in self.kernels:
            if used + len(k.source) > limit and parts:
                parts.append(f"# ... {len(self.kernels) - len(parts)} more kernel(s) left out")
                break
            parts.append(k.source[:limit])
            used += len(k.source)
        if self.launcher and used + len(self.launcher) <= limit:
            parts.append("# inductor's launch for this case (its autotuner picks XBLOCK and num_warps at run time):\n"
                         + self.launcher)
        return "\n\n".join(parts)

    def helpers_used(self) -> list[str]:
        return sorted({h for k in self.kernels for h in k.helpers})


def _kernel_source(name: str, text: str) -> Kernel:
    """The jit function of one generated kernel module, without inductor's imports and decorator."""
    lines = text.splitlines()
    tree = parse(text)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    keep = [d for d in fn.decorator_list if ast.unparse(d) in ("triton.jit", "jit")]
    start = (keep[0].lineno if keep else fn.lineno) - 1
    source = "\n".join(lines[start:fn.end_lineno]).rstrip()
    if not keep:
        source = "@triton.jit\n" + source
    helpers = sorted({h for h in HELPERS if h in source})
    return Kernel(name, source, helpers)


def _launcher(tree: ast.Module, code: str) -> str:
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "call"]
    if not calls:
        return ""
    body = textwrap.dedent(" " * calls[0].col_offset + (ast.get_source_segment(code, calls[0]) or ""))
    skip = re.compile(r"^\s*(#|assert_|del |args\.clear|raw_stream|stream\d* = get_raw_stream|with torch\.cuda\._Device"
                      r"|torch\.cuda\.set_device)")
    kept = [line for line in body.splitlines() if line.strip() and not skip.match(line)]
    return "\n".join(kept)


def parse_output(codes: list[str]) -> tuple[list[Kernel], str]:
    """Inductor's output modules -> (the Triton kernels, the launch code of the first graph)."""
    kernels, launcher = [], ""
    for code in codes:
        tree = parse(code)
        for node in tree.body:
            call = node.value if isinstance(node, ast.Assign) else None
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "triton" \
                    and len(call.args) >= 2 and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                    for a in call.args[:2]):
                kernels.append(_kernel_source(call.args[0].value, call.args[1].value))
        launcher = launcher or _launcher(tree, code)
    return kernels, launcher


def from_capture(result: dict, reference: str) -> InductorCode:
    """An InductorCode from what evolver/inductor_capture.py wrote (a live run or a recording)."""
    if not result.get("ok"):
        return InductorCode(False, f"torch.compile of the reference failed: {result.get('error', 'no result')}",
                            reference)
    try:
        kernels, launcher = parse_output(result["codes"])
    except (SyntaxError, StopIteration, KeyError, TypeError) as exc:
        return InductorCode(False, f"inductor's output could not be read: {type(exc).__name__}: {exc}", reference)
    if not kernels:
        return InductorCode(False, "torch.compile generated no Triton kernel for the reference (it may call "
                                   "a library such as cuBLAS instead)", reference)
    return InductorCode(True, "", reference, result.get("case", ""), result.get("device", ""), kernels, launcher)


def reference_source(bundle: Path, reference: str | None, limit: int = 4000) -> str:
    """The reference function's source from ``bundle/reference/`` (the whole file when the function is not
    found at its top level), cut to ``limit`` characters; empty when there is none."""
    if not reference or ":" not in reference:
        return ""
    file, func = reference.split(":", 1)
    try:
        text = (Path(bundle) / REFERENCE_DIR / file).read_text()
        tree = parse(text)
    except (OSError, SyntaxError, ValueError):
        return ""
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == func), None)
    source = ast.get_source_segment(text, fn) if fn is not None else text
    return (source or text)[:limit]


def _scrubbed(backend: str) -> dict:
    """The workers' environment (no API keys or tokens): the reference is the target's code."""
    from runners.sandbox import scrubbed_env

    return scrubbed_env(backend)


def capture(bundle: Path, spec, backend: str, out: Path | None = None, timeout: float = 240.0,
            cpu_triton: bool = False, env: dict | None = None) -> InductorCode:
    """Generate the code in a subprocess of the target's Python (``spec.python``), on the GPU. ``backend`` is
    the run's backend name: only ``triton`` (CUDA) has a device inductor emits Triton for, unless ``cpu_triton``
    (tests, recordings). The raw result is kept in ``out/inductor.json`` for the record."""
    reference = spec.reference or ""
    if not reference:
        return InductorCode(False, "the config names no torch `reference:`")
    if backend not in GPU_BACKENDS and not cpu_triton:
        return InductorCode(False, f"torch.compile emits Triton only for a CUDA device, and this run uses the "
                                   f"{backend} backend, so none is offered", reference)
    with tempfile.TemporaryDirectory(prefix="ks-inductor-") as tmp:
        result_file, spec_file = Path(tmp) / "result.json", Path(tmp) / "task.json"
        spec_file.write_text(json.dumps(spec.to_dict(), default=str))
        run_env = dict(env if env is not None else _scrubbed(backend))
        run_env.pop("TRITON_INTERPRET", None)
        run_env.update({"PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), *spec.import_paths]),
                        "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / "cache"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
                        "TORCHINDUCTOR_AUTOGRAD_CACHE": "0", "TORCHINDUCTOR_COMPILE_THREADS": "1",
                        "TRITON_CACHE_DIR": str(Path(tmp) / "triton")})
        cmd = [spec.python or sys.executable, "-m", "evolver.inductor_capture", str(Path(bundle).resolve()),
               str(result_file), "--spec", str(spec_file)] + (["--cpu-triton"] if cpu_triton else [])
        try:
            proc = subprocess.run(cmd, env=run_env, cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return InductorCode(False, f"torch.compile of the reference took longer than {timeout:.0f} s", reference)
        except OSError as exc:
            return InductorCode(False, f"could not start {cmd[0]}: {exc}", reference)
        try:
            result = json.loads(result_file.read_text())
        except (OSError, ValueError):
            tail = (proc.stderr or "").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            result = {"ok": False, "error": f"the capture process wrote no result ({tail[0][:300]})"}
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "inductor.json").write_text(json.dumps(result, indent=1))
    code = from_capture(result, reference)
    log.info("torch.compile code for %s: %s", reference, f"{len(code.kernels)} kernel(s) for case {code.case}"
             if code.available else code.reason)
    return code
