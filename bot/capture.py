"""Harness capture: run the kernel's own tests once and turn the entry's recorded calls into cases.

The tests run at HEAD in a temporary worktree, in the target's Python, with ``runners/capture_plugin.py``
loaded. Each recorded call is matched to the config's arguments: a tensor's sizes give the shape symbols
(``[T, "2*I"]`` and a (7, 320) tensor give T=7, I=160), a missing optional argument turns its ``when`` flag off.
Calls that fit are deduplicated and bounded (spread over sizes); calls that do not are counted with the
reason. The same run is the repository's test "before any change".

The values of integer and bool tensors (token ids, ``cu_seqlens``, block tables) are recorded too, bounded
(runners/capture_plugin.py), and a captured case replays them (``Case.recorded``, runners/recorded.py) instead
of drawing them from ``low``..``high``, which would give indices that do not fit the other arguments.
"""
from __future__ import annotations

import ast
import atexit
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from runners.inputs import eval_dim
from runners.recorded import CASE_MAX_BYTES, ITEM_SIZES, RecordedError, add_variant, entry, nbytes
from runners.recorded import tensor as recorded_tensor
from runners.task import Case
from runners.syntax import parse

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
SHIMS = PLUGIN.parent / "interpreter_shims.py"
PLUGIN_NAME = "ks_capture_plugin"
_DEVICE_WORDS = ("cuda", "nvidia", "gpu", "driver", "device", "hip", "rocm", "nvml")
INTERPRETER_MAX_ELEMENTS = 1 << 18  # larger captured calls are left to the GPU: the interpreter is slow
INIT_CALLS = 200  # `kernelsmith init --capture` stops the test run after this many recorded calls
log = logging.getLogger("kernelsmith.capture")


@dataclass
class Capture:
    run: TestRun
    calls: list[dict] = field(default_factory=list)
    installed: bool = False
    error: str | None = None  # why the plugin could not wrap the entry
    error_frames: list[dict] = field(default_factory=list)  # where, in the repository's files (importing it)
    shims: list[str] = field(default_factory=list)  # interpreter shims put in (runners/interpreter_shims.py)
    runs_pytest: bool = True
    backend: str = "triton"
    cuda_moved: int | None = None  # on the interpreter: tensor placements on `cuda` the tests made, moved to the CPU
    value_files: int = 0  # distinct integer/bool tensors whose values were recorded
    value_bytes: int = 0
    values_skipped: int = 0  # integer/bool tensor arguments over the recorder's bounds (drawn from low..high)

    def why_none(self) -> str:
        """Why no call was recorded, in one line: the recorder's error, or the test's exit and last line."""
        if self.error:
            return self._import_failure()
        if not self.runs_pytest:
            return "the test command does not run pytest, so the recorder was not loaded"
        lines = [x.strip() for x in self.run.output_tail.splitlines() if x.strip()]
        last = next((x for x in reversed(lines) if x.startswith("E ")),  # pytest's error, else its summary line
                    next((x for x in reversed(lines) if x.startswith(("FAILED ", "ERROR "))), lines[-1] if lines else ""))
        if not self.run.passed:
            from .kernel_checks import test_environment_fault

            fault = test_environment_fault(self.run.output_tail, self.backend)
            hint = ("; Triton's CPU interpreter cannot run this kernel as written (compiled Triton may): capture on "
                    "a GPU with --backend triton") if "InterpreterError" in self.run.output_tail else ""
            hint = f"; {fault}" if fault else hint
            return f"`{self.run.command}` exited {self.run.returncode}: {' '.join(last.split())[:300]}{hint}"
        return f"`{self.run.command}` passed without calling it ({last.strip()[:200]})"


    def _import_failure(self) -> str:
        """The recorder imports the kernel module the way the tests do (through its package ``__init__``
        files): name the repository's line that failed, and say when it is the environment, not the kernel."""
        frames = self.error_frames
        where = ""
        if frames:
            last = frames[-1]
            where = f" at {last['file']} line {last['line']}" + (f" (`{last['code']}`)" if last["code"] else "")
            if len(frames) > 1 and frames[0]["file"] != last["file"]:
                where += f", reached from {frames[0]['file']} line {frames[0]['line']}"
        text = f"importing the kernel module as the tests do failed{where}: {self.error}"
        if self.backend == "interpret" and any(w in (self.error or "").lower() for w in _DEVICE_WORDS):
            text += (" — that line asks for a GPU while the package is imported, and the CPU interpreter has none: "
                     "the environment, not the kernel; capture on a GPU (--backend triton), or set `capture: false`")
        return text


_DRY_RUN_DIR: list[Path] = []


def cpu_dry_run(env: dict[str, str]) -> dict[str, str]:
    """Every pytest run of the repository's tests on the CPU interpreter (the capture run, the run before any
    change, the run with the champion) loads the capture plugin for its CPU dry run only: tensors the tests put
    on ``cuda`` are made on the CPU, ``torch.cuda`` bookkeeping does nothing, and Triton's interpreter gets a
    stand-in driver and list grids. Without ``KS_CAPTURE_MODULE`` it records nothing."""
    if not _DRY_RUN_DIR:
        folder = Path(tempfile.mkdtemp(prefix="ks-cpu-dry-run-"))
        shutil.copyfile(PLUGIN, folder / f"{PLUGIN_NAME}.py")
        shutil.copyfile(SHIMS, folder / "ks_interpreter_shims.py")
        atexit.register(shutil.rmtree, folder, True)
        _DRY_RUN_DIR.append(folder)
    env["PYTHONPATH"] = os.pathsep.join([str(_DRY_RUN_DIR[0]), *filter(None, [env.get("PYTHONPATH")])])
    env["KS_CAPTURE_CPU"] = "1"
    if f"-p {PLUGIN_NAME}" not in env.get("PYTEST_ADDOPTS", ""):
        env["PYTEST_ADDOPTS"] = f"-p {PLUGIN_NAME} {env.get('PYTEST_ADDOPTS', '')}".strip()
    return env


def run_capture(target: Target, test: str, module: str, entry: str, backend: str,
                timeout: float = 900.0, stop_after: int | None = None) -> Capture:
    """The test at HEAD with the capture plugin recording calls of ``module.entry`` (a dotted name).
    ``stop_after``: end the test run once that many calls are recorded (for a proposal, not a test pass)."""
    parsed = parse_test(test)
    tmp = Path(tempfile.mkdtemp(prefix="ks-capture-"))
    try:
        shutil.copyfile(PLUGIN, tmp / f"{PLUGIN_NAME}.py")
        shutil.copyfile(SHIMS, tmp / "ks_interpreter_shims.py")
        out = tmp / "calls.jsonl"
        values = tmp / "values"
        values.mkdir()
        with worktree(target) as root:
            env = pytest_env(backend, root, target.tests)
            env["PYTHONPATH"] = f"{tmp}:{env['PYTHONPATH']}"
            env.update(KS_CAPTURE_MODULE=module, KS_CAPTURE_ENTRY=entry, KS_CAPTURE_OUT=str(out),
                       KS_CAPTURE_VALUES=str(values), KS_CAPTURE_CPU="1" if backend == "interpret" else "0",
                       KS_CAPTURE_STOP=str(stop_after or 0))
            if f"-p {PLUGIN_NAME}" not in env.get("PYTEST_ADDOPTS", ""):  # pytest and commands that run it
                env["PYTEST_ADDOPTS"] = f"-p {PLUGIN_NAME} {env.get('PYTEST_ADDOPTS', '')}".strip()
            python = target.tests.python if target.tests else None
            argv = command_line(parsed, python, None)
            run = timed_test_run(argv, root, env, timeout, python)
        run.command = run.command.replace(f" -p {PLUGIN_NAME}", "")  # shown as the user would run it
        capture = Capture(run=run, runs_pytest=parsed.runs_pytest, backend=backend)
        loaded: dict[str, dict] = {}  # sha256 -> the recorded tensor, shared by the calls that passed it
        for line in out.read_text().splitlines() if out.exists() else []:
            record = json.loads(line)
            if record.get("summary"):
                capture.installed, capture.error = record["installed"], record["error"]
                capture.error_frames, capture.shims = record.get("error_frames") or [], record.get("shims") or []
                capture.cuda_moved = record.get("cuda_moved")
                capture.value_files, capture.value_bytes = record.get("value_files", 0), record.get("value_bytes", 0)
                capture.values_skipped = record.get("values_skipped", 0)
            else:
                capture.calls.append(_load_values(record, values, loaded))
        return capture
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_values(record: dict, folder: Path, loaded: dict[str, dict]) -> dict:
    """The call with each recorded tensor's ``values`` read from its file and checked (a known integer dtype,
    the size its shape needs, its digest): ``{dtype, shape, sha256, data}``, or ``{skipped: why}``."""
    for arg in record.get("args", {}).values():
        values = arg.get("values") if isinstance(arg, dict) else None
        if not isinstance(values, dict) or "file" not in values:
            continue
        digest = str(values.get("sha256", ""))
        if digest not in loaded:
            try:
                name = Path(str(values["file"])).name
                raw = (folder / name).read_bytes()
                checked = entry(str(arg.get("dtype")), list(arg.get("shape", [])), raw)
                if checked["sha256"] != digest:
                    raise RecordedError("the file does not match its digest")
                loaded[digest] = checked
            except (OSError, RecordedError, TypeError, ValueError) as exc:
                loaded[digest] = {"skipped": f"recorded values unreadable: {exc}"}
        arg["values"] = loaded[digest]
    return record


def _fits(rec: dict, dtype: str) -> bool:
    """Whether the recorded values keep their value in the config's dtype."""
    import torch

    values = recorded_tensor(rec, getattr(torch, rec["dtype"]), "cpu")
    return bool(torch.equal(values.to(getattr(torch, dtype)).to(values.dtype), values))


def replayed_values(call: dict, kernel) -> tuple[dict[str, dict], dict[str, str]]:
    """(argument -> recorded values a case made from ``call`` replays, argument -> why an integer tensor's
    values are not replayed and are drawn from low..high instead)."""
    recorded: dict[str, dict] = {}
    drawn: dict[str, str] = {}
    total = 0
    for name, arg in kernel.args.items():
        rec = call["args"].get(name, {})
        if arg.shape is None or arg.dtype not in ITEM_SIZES or rec.get("kind") != "tensor":
            continue
        values = rec.get("values")
        if not isinstance(values, dict):
            drawn[name] = "its values were not recorded"
        elif "data" not in values:
            drawn[name] = str(values.get("skipped", "its values were not recorded"))
        elif values["dtype"] != arg.dtype and not _fits(values, arg.dtype):
            drawn[name] = f"the test passed {values['dtype']} values that {arg.dtype} (the config's dtype) cannot hold"
        elif total + nbytes(values) > CASE_MAX_BYTES:
            drawn[name] = f"{nbytes(values)} bytes, over the {CASE_MAX_BYTES} replayed per case"
        else:
            total += nbytes(values)
            recorded[name] = values
    return recorded, drawn


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
    node = parse(text, mode="eval").body
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
            elif rec.get("kind") == "dtype" and f"torch.{rec['value']}" != arg.value:  # out_dtype=torch.bfloat16
                values[name] = f"torch.{rec['value']}"
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
    recorded, _ = replayed_values(call, kernel)
    return Case(symbols=symbols, dtype=dtype or kernel.dtypes[0], origin="captured", strides=strides,
                values=values, recorded=recorded), ""


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
    drawn: dict[str, dict[str, str]] = {}  # case id -> argument -> why its integer values are drawn, not replayed
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
        if case.id not in seen and case.id not in unique:
            unique[case.id] = case
            drawn[case.id] = replayed_values(call, kernel)[1]
        elif case.id in unique:  # another call at this case: its integer values vary the later trials and slots
            add_variant(unique[case.id], case.recorded)
    ordered = sorted(unique.values(), key=lambda c: (_elements(c, kernel), c.id))
    if limit <= 0:
        ordered = []  # `captured_cases: 0`: record for the report, keep none
    elif len(ordered) > limit:
        step = (len(ordered) - 1) / max(1, limit - 1)
        ordered = [ordered[round(i * step)] for i in range(limit)] if limit > 1 else ordered[-1:]
    undeclared = sorted((written - set(kernel.written)) & set(kernel.args))
    not_replayed: dict[str, int] = {}
    for case in ordered:
        for name, why in drawn[case.id].items():
            key = f"`{name}`: {why}"
            not_replayed[key] = not_replayed.get(key, 0) + 1
    for key, count in not_replayed.items():  # said once per argument and reason, not per trial
        log.warning("capture: %d captured case(s) draw %s from low..high instead of replaying the tests' values "
                    "(%s)", count, key.split(":")[0], key.split(": ", 1)[1])
    summary = {"calls": len(calls), "distinct": len(unique), "kept": len(ordered), "skipped": skipped,
               "written_by_tests": sorted(written), "undeclared_written": undeclared,
               "replayed": sorted({n for c in ordered for n in c.recorded}),
               "replayed_cases": sum(1 for c in ordered if c.recorded), "not_replayed": not_replayed,
               "replayed_calls": sum(1 + len(c.variants) for c in ordered if c.recorded)}
    return ordered, summary
