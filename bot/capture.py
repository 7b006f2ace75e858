"""Harness capture: run the kernel's own tests once and turn the entry's recorded calls into cases.

The tests run at HEAD in a temporary worktree, in the target's Python, with ``runners/capture_plugin.py``
loaded. Each recorded call is matched to the config's arguments: a tensor's sizes give the shape symbols
(``[T, "2*I"]`` and a (7, 320) tensor give T=7, I=160), a missing optional argument turns its ``when`` flag off.
Calls that fit are deduplicated and bounded (spread over sizes); calls that do not are counted with the
reason. The same run is the repository's test "before any change".
"""
from __future__ import annotations

import ast
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from runners.inputs import eval_dim
from runners.task import Case

from .repo_tests import (
    TestRun,
    command_line,
    parse_test,
    pytest_env,
    timed_test_run,
    worktree,
)
from .config import size_value
from .target import Target

PLUGIN = Path(__file__).resolve().parent.parent / "runners" / "capture_plugin.py"
PLUGIN_NAME = "ks_capture_plugin"
INTERPRETER_MAX_ELEMENTS = 1 << 18  # larger captured calls are left to the GPU: the interpreter is slow
INIT_CALLS = 200  # `kernelsmith init --capture` stops the test run after this many recorded calls


@dataclass
class Capture:
    run: TestRun
    calls: list[dict] = field(default_factory=list)
    installed: bool = False
    error: str | None = None  # why the plugin could not wrap the entry
    runs_pytest: bool = True
    cuda_moved: int | None = None  # on the interpreter: tensor placements on `cuda` the tests made, moved to the CPU

    def why_none(self) -> str:
        """Why no call was recorded, in one line: the recorder's error, or the test's exit and last line."""
        if self.error:
            return f"the recorder could not wrap the entry ({self.error})"
        if not self.runs_pytest:
            return "the test command does not run pytest, so the recorder was not loaded"
        lines = [x.strip() for x in self.run.output_tail.splitlines() if x.strip()]
        last = next((x for x in reversed(lines) if x.startswith("E ")),  # pytest's error, else its summary line
                    next((x for x in reversed(lines) if x.startswith(("FAILED ", "ERROR "))), lines[-1] if lines else ""))
        if not self.run.passed:
            hint = ("; Triton's CPU interpreter cannot run this kernel as written (compiled Triton may): capture on "
                    "a GPU with --backend triton") if "InterpreterError" in self.run.output_tail else ""
            return f"`{self.run.command}` exited {self.run.returncode}: {' '.join(last.split())[:300]}{hint}"
        return f"`{self.run.command}` passed without calling it ({last.strip()[:200]})"


def run_capture(target: Target, test: str, module: str, entry: str, backend: str,
                timeout: float = 900.0, stop_after: int | None = None) -> Capture:
    """The test at HEAD with the capture plugin recording calls of ``module.entry`` (a dotted name).
    ``stop_after``: end the test run once that many calls are recorded (for a proposal, not a test pass)."""
    parsed = parse_test(test)
    tmp = Path(tempfile.mkdtemp(prefix="ks-capture-"))
    try:
        shutil.copyfile(PLUGIN, tmp / f"{PLUGIN_NAME}.py")
        out = tmp / "calls.jsonl"
        with worktree(target) as root:
            env = pytest_env(backend, root, target.tests)
            env["PYTHONPATH"] = f"{tmp}:{env['PYTHONPATH']}"
            env.update(KS_CAPTURE_MODULE=module, KS_CAPTURE_ENTRY=entry, KS_CAPTURE_OUT=str(out),
                       KS_CAPTURE_CPU="1" if backend == "interpret" else "0", KS_CAPTURE_STOP=str(stop_after or 0))
            if parsed.is_command:  # a command that runs pytest picks the plugin up from here
                env["PYTEST_ADDOPTS"] = f"-p {PLUGIN_NAME} {env.get('PYTEST_ADDOPTS', '')}".strip()
            python = target.tests.python if target.tests else None
            argv = command_line(parsed, python, None if parsed.is_command else PLUGIN_NAME)
            run = timed_test_run(argv, root, env, timeout, python)
        run.command = run.command.replace(f" -p {PLUGIN_NAME}", "")  # shown as the user would run it
        capture = Capture(run=run, runs_pytest=parsed.runs_pytest)
        for line in out.read_text().splitlines() if out.exists() else []:
            record = json.loads(line)
            if record.get("summary"):
                capture.installed, capture.error = record["installed"], record["error"]
                capture.cuda_moved = record.get("cuda_moved")
            else:
                capture.calls.append(record)
        return capture
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _solve(dim, size: int, symbols: dict) -> str | None:
    """Bind the symbols of one shape entry to ``size``; returns a conflict message or None."""
    if isinstance(dim, int):
        return None if dim == size else f"size {size} where the config says {dim}"
    text = str(dim).replace(" ", "")
    if text.isidentifier():
        if text in symbols and symbols[text] != size:
            return f"{text}={size} here but {symbols[text]} in another argument"
        symbols[text] = size
        return None
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.BinOp) and {type(node.left), type(node.right)} == {ast.Name, ast.Constant}:
        name = node.left.id if isinstance(node.left, ast.Name) else node.right.id
        const = node.right.value if isinstance(node.right, ast.Constant) else node.left.value
        if name not in symbols:
            left = isinstance(node.left, ast.Name)
            solved = {ast.Mult: size // const if size % const == 0 else None,
                      ast.FloorDiv: size * const if left else None,
                      ast.Add: size - const, ast.Sub: size + const if left else None}.get(type(node.op))
            if solved is None:
                return f"cannot solve {text}={size}"
            symbols[name] = solved
    try:
        return None if eval_dim(dim, symbols) == size else f"{text} is not {size}"
    except (KeyError, ValueError) as exc:
        return str(exc)


def to_case(call: dict, kernel) -> tuple[Case | None, str]:
    """The config-shaped case for one recorded call, or (None, why it does not fit)."""
    symbols: dict = {}
    dtype = None
    strides, values = {}, {}
    for name, arg in kernel.args.items():
        rec = call["args"].get(name, {"kind": "absent"})
        if arg.shape is None:
            if arg.size is None and rec.get("kind") == "scalar" and rec["value"] != arg.value and arg.range is None:
                values[name] = rec["value"]
            continue
        present = rec.get("kind") == "tensor"
        if arg.when:
            symbols[arg.when] = present
            if not present:
                continue
        if not present:
            return None, f"argument `{name}` was {rec.get('kind')}, not a tensor"
        if len(rec["shape"]) != len(arg.shape):
            return None, f"argument `{name}` has {len(rec['shape'])} dimensions, the config gives {len(arg.shape)}"
        for dim, size in zip(arg.shape, rec["shape"]):
            problem = _solve(dim, size, symbols)
            if problem:
                return None, f"argument `{name}`: {problem}"
        if arg.dtype is None and rec["dtype"] in ("float16", "bfloat16", "float32"):
            if dtype and rec["dtype"] != dtype:
                return None, f"mixed float dtypes ({dtype} and {rec['dtype']} for `{name}`)"
            dtype = rec["dtype"]
        if not rec.get("contiguous", True):
            strides[name] = rec["stride"]
    for shape in kernel.shapes:  # flags the config uses but this call did not set
        for key, value in shape.items():
            if isinstance(value, bool):
                symbols.setdefault(key, False)
    for name, arg in kernel.args.items():  # `size:` arguments, once the tensors have bound the symbols
        if arg.size is None:
            continue
        rec = call["args"].get(name, {"kind": "absent"})
        try:
            want = size_value(arg.size, symbols)
        except (KeyError, ValueError) as exc:
            return None, f"argument `{name}`: {exc}"
        if rec.get("kind") != "scalar" or rec["value"] != want:
            return None, f"argument `{name}` was {rec.get('value', rec.get('kind'))}, the config's size gives {want}"
        values[name] = want
    return Case(symbols=symbols, dtype=dtype or kernel.dtypes[0], origin="captured", strides=strides,
                values=values), ""


def _elements(case: Case, kernel) -> int:
    total = 0
    for arg in kernel.args.values():
        if arg.shape is not None and (not arg.when or case.symbols.get(arg.when)):
            n = 1
            for d in arg.shape:
                n *= eval_dim(d, case.symbols)
            total += n
    return total


def captured_cases(calls: list[dict], kernel, backend: str, limit: int,
                   configured: list[Case]) -> tuple[list[Case], dict]:
    """Deduplicated captured cases, at most ``limit``, spread from the smallest to the largest call."""
    seen = {c.id for c in configured}
    unique: dict[str, Case] = {}
    skipped: dict[str, int] = {}
    written: set[str] = set()
    for call in calls:
        written |= set(call.get("written") or [])
        case, why = to_case(call, kernel)
        if case is not None and backend == "interpret" and (
                case.dtype == "bfloat16" or _elements(case, kernel) > INTERPRETER_MAX_ELEMENTS):
            case, why = None, "too large or bf16 for the CPU interpreter"
        if case is None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        if case.id not in seen:
            unique.setdefault(case.id, case)
    ordered = sorted(unique.values(), key=lambda c: (_elements(c, kernel), c.id))
    if limit <= 0:
        ordered = []  # `captured_cases: 0`: record for the report, keep none
    elif len(ordered) > limit:
        step = (len(ordered) - 1) / max(1, limit - 1)
        ordered = [ordered[round(i * step)] for i in range(limit)] if limit > 1 else ordered[-1:]
    undeclared = sorted((written - set(kernel.written)) & set(kernel.args))
    summary = {"calls": len(calls), "distinct": len(unique), "kept": len(ordered), "skipped": skipped,
               "written_by_tests": sorted(written), "undeclared_written": undeclared}
    return ordered, summary
