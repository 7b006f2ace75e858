"""Running the target repository's own tests in a temporary git worktree, with or without a new kernel.

`test:` in the config is one line: pytest paths or node ids (``tests/test_x.py::TestX::test_y -k fp16``), or a
command (``python -m unittest test.test_x``, ``bash scripts/kernel_tests.sh``). Tests run in the target's own
interpreter (`python:`) when the config names one, with the package's import root first on PYTHONPATH so that
the worktree's code is imported, never an installed copy.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from runners.isolation import without_credentials

from .target import Target

# A test line that starts with one of these words is a command, not a list of pytest arguments.
COMMAND_WORDS = frozenset({"python", "python3", "pytest", "bash", "sh", "make", "tox", "nox", "uv", "torchrun"})
_OPTIONS_WITH_VALUE = frozenset({"-k", "-m", "--maxfail", "--timeout", "-n", "--deselect", "--ignore"})


@dataclass(frozen=True)
class TestTarget:
    """What `test:` names: ``argv`` is pytest's arguments, or the command's words when ``is_command``."""

    text: str
    argv: tuple[str, ...]
    is_command: bool
    paths: tuple[str, ...]  # files or folders named (node ids without their ``::`` part), relative; for a
    # command, also the files its unittest names may mean (the caller keeps those that exist)
    __test__ = False  # not a pytest test class

    @property
    def runs_pytest(self) -> bool:
        return not self.is_command or self.argv[0] == "pytest" or self.argv[1:3] == ("-m", "pytest")


def _looks_like_path(word: str) -> bool:
    return "/" in word or "::" in word or word.endswith(".py") or word in ("test", "tests")


def parse_test(text: str) -> TestTarget:
    """Raises ValueError (the config turns it into an error naming the line) for an unusable test line."""
    try:
        words = tuple(shlex.split(text))
    except ValueError as exc:
        raise ValueError(f"`test` does not split into words: {exc}") from None
    if not words:
        raise ValueError("`test` is empty")
    is_command = words[0] in COMMAND_WORDS or words[0].startswith(("./", "/"))
    paths, skip = [], False
    for word in words[1:] if is_command else words:
        if skip is True:
            skip = False
            continue
        if word.startswith("-"):
            # a known option's value, or a repository's own `--mode quick` (a value that is no path)
            skip = word in _OPTIONS_WITH_VALUE or ("-" if word.startswith("--") and "=" not in word else False)
            continue
        if skip == "-" and not _looks_like_path(word):
            skip = False
            continue
        skip = False
        path = word.split("::", 1)[0]
        if not is_command or path.endswith(".py") or "/" in path:
            if path.startswith("/") or ".." in PurePosixPath(path).parts:
                raise ValueError(f"`test` path {path!r} must be relative to the repository root")
            paths.append(path)
    if is_command and "unittest" in words:  # dotted test names: test.srt.test_norm.TestX -> test/srt/test_norm.py
        for word in words:
            parts = word.split(".")
            if len(parts) > 1 and all(p.isidentifier() for p in parts) and word not in ("unittest",):
                paths += ["/".join(parts[:n]) + ".py" for n in range(len(parts), 0, -1)]
    if not is_command and not paths:
        raise ValueError("`test` names no pytest path or node id (give one, e.g. tests/test_x.py -k fp16)")
    return TestTarget(text=text, argv=words, is_command=is_command, paths=tuple(dict.fromkeys(paths)))


@dataclass
class TestRun:
    command: str
    passed: bool
    returncode: int
    duration_s: float
    output_tail: str
    with_champion: bool
    __test__ = False


@dataclass
class TestSettings:
    """How the target's tests run: its interpreter, extra environment and import roots (relative dirs)."""

    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    import_roots: list[str] = field(default_factory=list)
    __test__ = False


@contextlib.contextmanager
def worktree(target: Target, commit: str | None = None) -> Iterator[Path]:
    """A detached worktree of ``commit`` (default HEAD) in a temporary folder; yields the target root in it.

    The user's checkout, branch and index are never touched; the worktree is removed on exit.
    """
    tmp = Path(tempfile.mkdtemp(prefix="ks-worktree-"))
    path = tmp / "wt"
    target.repo.git.worktree("add", "--detach", str(path), commit or target.commit)
    try:
        yield path / target.prefix
    finally:
        target.repo.git.worktree("remove", "--force", str(path))
        shutil.rmtree(tmp, ignore_errors=True)


def pytest_env(backend: str, root: Path, settings: TestSettings | None = None) -> dict[str, str]:
    """The user's environment without credentials: the test runs code kernelsmith wrote."""
    settings = settings or TestSettings()
    env = without_credentials({**os.environ, **settings.env})
    roots = [str(root / r) for r in settings.import_roots if r not in ("", ".")]
    env["PYTHONPATH"] = os.pathsep.join([str(root), *roots, *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if settings.python:  # scripts that call `pytest` or `python` find the target's environment first
        env["PATH"] = os.pathsep.join([str(Path(settings.python).parent), env.get("PATH", "")])
    if backend == "interpret":
        env["TRITON_INTERPRET"] = "1"
        from .capture import cpu_dry_run  # tests written for a GPU run on the CPU, in every run (not only capture)

        cpu_dry_run(env)
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def command_line(test: TestTarget, python: str | None, plugin: str | None = None) -> list[str]:
    """The argv that runs ``test`` with ``python``; ``plugin`` is a pytest plugin module to load."""
    python = python or sys.executable
    plugin_args = ["-p", plugin] if plugin else []
    if not test.is_command:
        return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args, *test.argv]
    words = list(test.argv)
    if words[0] in ("python", "python3"):
        return [python, *words[1:]]
    if words[0] == "pytest":
        return [python, "-m", "pytest", *plugin_args, *words[1:]]
    return words


def run_command(argv: list[str], root: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        return proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return -9, f"{out}\n(timed out after {timeout:.0f} s)"
    except OSError as exc:
        return -1, f"could not start {argv[0]}: {exc}"


def run_repo_test(root: Path, test: str, backend: str, timeout: float = 900.0, with_champion: bool = False,
                  settings: TestSettings | None = None) -> TestRun:
    """The test in ``root``; the root (and the package's import root) go first on sys.path so that the
    worktree's package is imported, not an installed copy."""
    settings = settings or TestSettings()
    argv = command_line(parse_test(test), settings.python)
    return timed_test_run(argv, root, pytest_env(backend, root, settings), timeout, settings.python, with_champion)


def output_tail(output: str, keep: int = 15) -> str:
    """The output's last ``keep`` lines, after the pytest error lines (``E   ModuleNotFoundError: ...``,
    ``ERROR``/``FAILED``) that came before them: an engine's warnings summary (SGLang's tests print 17) pushes
    the error that stopped collection out of the last lines."""
    lines = output.strip().splitlines()
    errors = [x for x in lines[:-keep] if x.startswith(("E   ", "ERROR ", "FAILED "))][-6:]
    return "\n".join([*errors, *(["..."] if errors else []), *lines[-keep:]])


def timed_test_run(argv: list[str], root: Path, env: dict[str, str], timeout: float, python: str | None,
                   with_champion: bool = False) -> TestRun:
    """``argv`` run in ``root``, as a TestRun (the interpreter shown as ``python``, the output's last lines)."""
    started = time.perf_counter()
    code, output = run_command(argv, root, env, timeout)
    tail = output_tail(output)
    shown = (["python", *argv[1:]] if argv[0] == (python or sys.executable) else argv)
    return TestRun(command=shlex.join(shown), passed=code == 0, returncode=code,
                   duration_s=time.perf_counter() - started, output_tail=tail, with_champion=with_champion)


def run_test_with_source(target: Target, module: str, source: str | None, test: str, backend: str) -> TestRun:
    """The repo's test at HEAD, with ``module`` replaced by ``source`` (None: unchanged), run with the
    target's test settings (its Python, environment and import roots)."""
    with worktree(target) as root:
        if source is not None:
            (root / module).write_text(source)
        return run_repo_test(root, test, backend, with_champion=source is not None, settings=target.tests)
