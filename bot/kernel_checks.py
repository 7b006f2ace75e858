"""Checks of one configured kernel before anything is written: each failure names the file, the line and the fix.

- `path:`/`entry:` point at a function that exists (a moved function is found again by its name);
- the test names files that exist, and mentions the entry or something that reaches it;
- the module imports, the way a worker will import it, in the target's own Python (``runners/import_check.py``):
  a package that is not installed, a GPU query at import time under the interpreter, or any other import-time
  error is reported at the deepest line of the target's own code.
"""
from __future__ import annotations

import ast
import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from runners.extract import Extraction
from runners.isolation import without_credentials
from runners.syntax import parse

from .config import CONFIG_PATH, KernelConfig, _line_of
from .errors import UserError
from .repo_tests import TestTarget
from .scan import RepoIndex, is_test_file

CHECKER = Path(__file__).resolve().parent.parent / "runners" / "import_check.py"
# Whether the evaluation workers put in runners/interpreter_shims.py on the interpreter (runners/worker.py): the
# import check imports the module exactly as they will, so it follows them
INTERPRETER_SHIMS_IN_WORKERS = True
MARKER = "KS-IMPORT-CHECK:"


def config_at(root: Path, kernel: str, key: str) -> str:
    """``.github/kernelsmith.yml line N (kernels.<kernel>.<key>)``, for messages."""
    path = Path(root) / CONFIG_PATH
    try:
        line = _line_of(yaml.compose(path.read_text()), ("kernels", kernel, key))
    except (OSError, yaml.YAMLError):
        line = None
    return f"{CONFIG_PATH}{f' line {line}' if line else ''} (kernels.{kernel}.{key})"


def _defines(path: Path, name: str) -> bool:
    try:
        tree = parse(path.read_text())
    except (OSError, SyntaxError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def _module_functions(path: Path) -> list[str]:
    try:
        return [n.name for n in parse(path.read_text()).body if isinstance(n, ast.FunctionDef)]
    except (OSError, SyntaxError):
        return []


def check_entry(root: Path, name: str, kernel: KernelConfig) -> None:
    """The module exists and defines the entry; when either is wrong, look the entry up by its name."""
    module = Path(root) / kernel.path
    if module.is_file() and _defines(module, kernel.entry):
        return
    found = RepoIndex(root).find_symbol(kernel.entry)
    if found:
        places = ", ".join(f"{rel} line {line}" for rel, line in found[:3])
        why = "does not exist" if not module.is_file() else f"does not define `{kernel.entry}`"
        raise UserError(f"{kernel.path}, named by {config_at(root, name, 'path')}, {why}; `{kernel.entry}` is "
                        f"defined in {places}",
                        f"Set `path: {found[0][0]}` for `{name}` in {CONFIG_PATH} (the file has moved).")
    if not module.is_file():
        raise UserError(f"the module {kernel.path} named by {config_at(root, name, 'path')} does not exist in "
                        f"{root}, and no file defines `{kernel.entry}`",
                        "Fix `path:` (relative to the repository root); `kernelsmith scan` lists the kernels and "
                        "their entry functions.")
    names = _module_functions(module)
    close = difflib.get_close_matches(kernel.entry, names, n=3) or [n for n in names if not n.startswith("_")][:5]
    raise UserError(f"{kernel.path} defines no function `{kernel.entry}` ({config_at(root, name, 'entry')})",
                    f"Set `entry:` to the function that launches the kernel"
                    f"{': ' + ', '.join(close) if close else ''} (`kernelsmith scan` lists them).")


def _entry_def(path: Path, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    try:
        tree = parse(path.read_text())
    except (OSError, SyntaxError):
        return None
    return next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)


TORCH_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "half", "float", "double", "int8", "uint8",
                          "int16", "int32", "int64", "bool", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                          "float8_e5m2fnuz", "complex64"})


def workers_pass_dtypes() -> bool:
    """Whether the judge's workers turn a config scalar ``torch.float16`` into the dtype (``runners/inputs.py``
    ``config_scalar``); until they do, such a value would reach the entry as a string."""
    from runners import inputs

    return callable(getattr(inputs, "config_scalar", None))


def check_dtype_values(root: Path, name: str, kernel: KernelConfig) -> None:
    """A scalar that names a dtype (SGLang's ``triton_scaled_mm(..., out_dtype)``) is written ``torch.float16``;
    a bare ``float16`` would reach the entry as a string."""
    for arg_name, arg in kernel.args.items():
        value = arg.value
        if not isinstance(value, str) or value.removeprefix("torch.") not in TORCH_DTYPES:
            continue
        where = config_at(root, name, "args")
        if not value.startswith("torch."):
            raise UserError(f"`{arg_name}: {{value: {value}}}` under {where} is the string '{value}', not a dtype",
                            f"Write `{arg_name}: {{value: torch.{value}}}` to pass the dtype torch.{value}.")
        if not workers_pass_dtypes():
            raise UserError(f"`{arg_name}: {{value: {value}}}` under {where} asks for a torch.dtype argument, and "
                            "this kernelsmith's evaluation workers pass config scalars as they are (runners/inputs.py "
                            "has no `config_scalar`): the entry would get the string",
                            "Leave the argument out where the entry has a default for it; otherwise this kernel "
                            "needs kernelsmith's dtype scalars (runners/inputs.py `config_scalar`).")


def check_arguments(root: Path, name: str, kernel: KernelConfig) -> None:
    """``args:`` names parameters the entry has, and every parameter without a default: a call the judge makes
    would otherwise fail with a TypeError at the baseline check, after ``--out`` was written, as if the kernel
    were broken (SGLang's ``triton_scaled_mm(..., out_dtype, ...)``)."""
    node = _entry_def(Path(root) / kernel.path, kernel.entry)
    if node is None:  # assigned or imported under that name: nothing to read statically
        return
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    defaults = {p.arg for p in positional[len(positional) - len(a.defaults):]} if a.defaults else set()
    defaults |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
    params = [p.arg for p in [*positional, *a.kwonlyargs] if p.arg not in ("self", "cls")]
    where = f"{kernel.path} line {node.lineno}"
    unknown = [n for n in kernel.args if n not in params]
    if unknown and a.kwarg is None:
        close = difflib.get_close_matches(unknown[0], params, n=1)
        raise UserError(f"`{kernel.entry}` ({where}) has no parameter `{unknown[0]}`, named under "
                        f"{config_at(root, name, 'args')}; its parameters: {', '.join(params) or 'none'}",
                        f"Rename or remove `{unknown[0]}` in `args:`"
                        f"{f' (did you mean `{close[0]}`?)' if close else ''}: kernelsmith passes every argument "
                        "by keyword.")
    check_dtype_values(root, name, kernel)
    missing = [p for p in params if p not in defaults and p not in kernel.args]
    if missing:
        raise UserError(f"`{kernel.entry}` ({where}) takes `{missing[0]}` without a default, and "
                        f"{config_at(root, name, 'args')} does not give it"
                        f"{f' (nor {len(missing) - 1} more: ' + ', '.join(missing[1:]) + ')' if len(missing) > 1 else ''}",
                        f"Add `{missing[0]}:` under `args:`: a tensor as `{{shape: [...]}}`, a number or a flag as "
                        "`{value: ...}` (`kernelsmith init --capture` writes them from the kernel's own tests).")


def existing_test_paths(root: Path, test: TestTarget) -> list[str]:
    return [p for p in test.paths if (Path(root) / p).exists()]


def check_test_paths(root: Path, name: str, test: TestTarget) -> None:
    missing = [p for p in test.paths if not (Path(root) / p).exists()]
    if not test.is_command and missing:
        raise UserError(f"the test {missing[0]} named by {config_at(root, name, 'test')} does not exist in {root}",
                        "Fix `test:` to a pytest path or node id relative to the repository root "
                        "(`kernelsmith scan` lists the tests that reach each kernel).")


def _test_files(root: Path, paths: list[str]) -> list[str]:
    files = []
    for rel in paths:
        path = Path(root) / rel
        if path.is_dir():
            files += [p.relative_to(root).as_posix() for p in sorted(path.rglob("*.py")) if is_test_file(p.name)]
        elif path.suffix == ".py":
            files.append(rel)
    return files


def check_test_reaches(root: Path, name: str, kernel: KernelConfig, test: TestTarget, plan: Extraction) -> None:
    """The test files mention the entry, or a function or class that reaches it (read statically)."""
    files = _test_files(root, existing_test_paths(root, test))
    if not files:
        return  # a command with no test file we can read: the capture run checks it instead
    texts = {f: (Path(root) / f).read_text(errors="replace") for f in files}
    if any(kernel.entry in t for t in texts.values()):
        return
    scope = [plan.import_root if plan.import_root != "." else "", *files]
    index = RepoIndex(root, only=scope)
    callers = {sym for _, sym in index.callers((kernel.path, kernel.entry)) if sym != "<module>"}
    if any(c in t for c in callers for t in texts.values()):
        return
    raise UserError(f"the test {', '.join(files[:3])} named by {config_at(root, name, 'test')} never calls "
                    f"`{kernel.entry}`, nor anything that calls it",
                    "Point `test:` at the tests of this kernel (`kernelsmith scan` lists the tests that reach each "
                    "entry), so that a changed kernel is really tested.")


def check_import(root: Path, name: str, kernel: KernelConfig, plan: Extraction, backend: str,
                 python: str | None, import_paths: list[str], timeout: float = 300.0, env: dict | None = None) -> None:
    """Import the module as a worker will; raise a UserError that names the target's failing line."""
    job = {"root": str(root), "files": plan.files, "module": kernel.path, "entry": kernel.entry,
           "backend": backend, "import_paths": import_paths,
           "shims": backend == "interpret" and INTERPRETER_SHIMS_IN_WORKERS}
    python = python or sys.executable
    try:
        proc = subprocess.run([python, str(CHECKER)], input=json.dumps(job) + "\n", capture_output=True, text=True,
                              timeout=timeout, cwd=root, check=False,
                              env=without_credentials({**os.environ, **(env or {})}))  # it runs the target's code
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"could not import {kernel.path} with {python}: {exc}",
                        "Check `python:` in .github/kernelsmith.yml, or that importing the module finishes.") from None
    line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith(MARKER)), None)
    if line is None:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
        raise UserError(f"importing {kernel.path} with {python} ended without an answer (exit {proc.returncode}):\n{tail}",
                        "Make the module importable in a plain Python process (see the output above).")
    result = json.loads(line[len(MARKER):])
    if result["ok"]:
        return
    raise import_error(name, kernel, result, backend, python)


def import_error(name: str, kernel: KernelConfig, result: dict, backend: str, python: str) -> UserError:
    frames = result.get("frames") or []
    deepest = frames[result.get("blame", -1)] if frames else None  # a helper that only raises names its caller
    at = f"{deepest['file']} line {deepest['line']}" if deepest else kernel.path
    code = f" (`{deepest['code']}`)" if deepest and deepest.get("code") else ""
    via = ""
    if len(frames) > 1 and frames[0]["file"] != deepest["file"]:
        via = f", reached from {frames[0]['file']} line {frames[0]['line']}"
    what = f"{result['type']}: {result['message']}"
    if result["kind"] == "bad_entry":
        names = [n for n in result.get("names", []) if not n.startswith("_")]
        close = difflib.get_close_matches(kernel.entry, names, n=3)
        return UserError(f"{kernel.path} has no callable `{kernel.entry}` once imported",
                         f"Set `entry:` for `{name}` to one of: {', '.join(close or names[:6])}.")
    if result["kind"] == "missing_module":
        return UserError(f"{at}{code} imports `{result.get('missing') or result['message']}`, which is not installed "
                         f"in {python}{via}",
                         "Install it in that environment, or point `python:` in .github/kernelsmith.yml at the "
                         "target's own environment (where the engine's dependencies are installed).")
    if result["kind"] == "device_probe":
        return UserError(f"{at}{code} queries the GPU when the module is imported{via}, and the CPU interpreter "
                         f"(--backend {backend}) has none: {what}",
                         "Run on a GPU machine (--backend triton), or move that query into the function that needs "
                         "it, so that importing the module does not touch the device.")
    return UserError(f"importing {kernel.path} fails at {at}{code}{via}: {what}",
                     "Fix that line, or make the module importable in a plain worker process (every package it "
                     "imports installed in the `python:` environment, no work at import time).")


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n(?:\s+(.+))?')
_TORCH_NO_GPU = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver", "No CUDA GPUs are available",
                 "no GPU: kernelsmith runs this on Triton's CPU interpreter")


def _code_lines(error: str, files: list[str], root: Path | None) -> list[tuple[str, int, str]]:
    """(file, line, code) of the traceback's code lines that appear in ``files``, for a traceback cut short
    before its ``File`` line (the worker keeps the last lines only)."""
    out = []
    codes = [x.strip() for x in error.splitlines() if x.startswith("    ") and not x.strip().startswith(("File ", "^", "~"))]
    for rel in files if root else []:
        try:
            lines = (Path(root) / rel).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for code in codes:
            hits = [i for i, x in enumerate(lines, 1) if x.strip() == code]
            if len(hits) == 1:
                out.append((rel, hits[0], code))
    return out


def environment_fault(error: str, backend: str, files: list[str], root: Path | None = None) -> str | None:
    """When a baseline failure on the CPU interpreter comes from the interpreter or the missing GPU rather than
    from the kernel: what happened, at the repository's own line (``files``: the bundle's modules, relative
    to the repository root ``root``). None when the kernel may be at fault."""
    if backend != "interpret":
        return None
    frames = [(path, int(line), fn, (code or "").strip()) for path, line, fn, code in _FRAME.findall(error)]
    ours = [(rel, line, code) for path, line, _, code in frames for rel in files
            if Path(path).as_posix().endswith("/" + rel)] or _code_lines(error, files, root)
    at = f" ({ours[-1][0]} line {ours[-1][1]}: `{ours[-1][2]}`)" if ours else ""
    last = next((x.strip() for x in reversed(error.strip().splitlines()) if x.strip()), error.strip())
    if "active drivers" in error:
        return (f"the kernel's code asks Triton's driver which GPU it runs on{at}, and Triton's CPU interpreter has "
                f"no driver ({last}): the environment, not the kernel. Run on a GPU (--backend triton)")
    if frames and last.startswith("AssertionError") and re.search(r"is_cuda|device\.type\s*==\s*.cuda", frames[-1][3]):
        return (f"the entry checks that its inputs are on a GPU{at or f' (`{frames[-1][3]}`)'}, and on the CPU interpreter "
                f"the judge's inputs are CPU tensors: the environment, not the kernel. Run on a GPU (--backend triton)")
    if any(w in error for w in _TORCH_NO_GPU):
        return (f"the entry asks torch.cuda about the GPU when it is called{at}, and the CPU interpreter has "
                f"none ({last}): the environment, not the kernel. Run on a GPU (--backend triton)")
    where = [i for i, (path, *_) in enumerate(frames) if Path(path).as_posix().endswith("triton/runtime/interpreter.py")]
    kernel_frames = [i for i, (path, *_) in enumerate(frames) if any(Path(path).as_posix().endswith("/" + r)
                                                                     for r in files)]
    wrapped = "InterpreterError" in last.split(":")[0]  # the kernel's body failed: the interpreter re-raises it
    if where and not wrapped and frames[-1][0] == frames[where[-1]][0] and not [i for i in kernel_frames
                                                                              if i > where[0]]:
        line = frames[where[-1]][1]
        if "can only concatenate list" in error:
            return (f"Triton's CPU interpreter cannot launch this kernel as written{at}: the grid is a list, which "
                    f"compiled Triton accepts and the interpreter does not ({last}, raised in "
                    f"triton/runtime/interpreter.py line {line}, before the kernel ran): the environment, not the "
                    "kernel. Run on a GPU (--backend triton)")
        return (f"Triton's CPU interpreter failed while launching the kernel{at}, before the kernel ran ({last}, "
                f"raised in triton/runtime/interpreter.py line {line}): the interpreter may not support this launch "
                "as written (compiled Triton may), or the configured arguments do not fit it")
    return None


_OWN_RUNNERS = (Path(__file__).resolve().parent.parent / "runners").as_posix() + "/"


def kernelsmith_fault(error: str) -> str | None:
    """When a baseline failure was raised in kernelsmith's own evaluator (``runners/``), after the entry returned
    (an output whose dtype the workers cannot carry: SGLang's fp8 quantizers return ``torch.float8_e4m3fn``):
    that, instead of "fix the kernel". None when the error was raised elsewhere."""
    frames = [(path, int(line), (code or "").strip()) for path, line, _, code in _FRAME.findall(error)]
    if not frames or not Path(frames[-1][0]).resolve().as_posix().startswith(_OWN_RUNNERS):
        return None
    path, line, code = frames[-1]
    last = next((x.strip() for x in reversed(error.strip().splitlines()) if x.strip()), "")
    dtype = re.search(r"KeyError: (torch\.\w+)", last)
    what = (f"kernelsmith's workers cannot carry a {dtype.group(1)} tensor (an input or an output of the entry) "
            f"between their processes yet" if dtype and Path(path).name == "wire.py" else
            f"kernelsmith's evaluator failed after the entry ran ({last})")
    return (f"{what} (runners/{Path(path).name} line {line}: `{code}`): a limit of kernelsmith, not of the kernel")


_PYTEST_FRAME = re.compile(r"^([^\s/][^\s:]*\.py):(\d+): in \S+\n\s+(.+)$", re.M)


def test_environment_fault(output: str, backend: str) -> str | None:
    """When a repository test run on the CPU interpreter failed because the test (or what it calls) asks
    ``torch.cuda`` about a GPU: that, at the repository's deepest line in pytest's output. None otherwise."""
    noted = re.findall(r"^kernelsmith CPU dry run: (.+) asks torch.cuda about the GPU$", output, re.M)
    if backend == "interpret" and not noted and "InterpreterError" in output:
        # a kernel of the repository, unchanged, that Triton's interpreter cannot run (SGLang's fla
        # fused_recurrent kernels: "Did you forget to add @triton.jit ?"): its tests cannot pass on the CPU
        error = next((x.strip().removeprefix("E").strip() for x in output.splitlines()
                      if x.lstrip().startswith("E") and "InterpreterError" in x), "InterpreterError")
        failed = [x.split()[1] for x in output.splitlines() if x.startswith("FAILED ")][:2]
        return (f"Triton's CPU interpreter cannot run a kernel that the test launches ({error[:240]}"
                f"{'; in ' + ', '.join(failed) if failed else ''}), unchanged, as the repository has it: the "
                "environment, not the kernel (compiled Triton may run it). Run on a GPU (--backend triton), or point "
                "`test:` (`-k`, a node id) at tests whose kernels the interpreter runs")
    if backend != "interpret" or not (noted or any(w in output for w in _TORCH_NO_GPU)):
        return None
    frames = _PYTEST_FRAME.findall(output)  # relative paths: the repository's files, not site-packages
    at = (f" at {noted[0]}" if noted else
          f" at {frames[-1][0]} line {frames[-1][1]} (`{frames[-1][2].strip()}`)" if frames else "")
    return (f"the test (or the code it calls) asks torch.cuda about the GPU{at}, and the CPU interpreter has none: "
            "the environment, not the kernel. Run on a GPU (--backend triton), or point `test:` (`-k`, a node id) at "
            "tests that run without one")
