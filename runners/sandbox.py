"""Run each evaluation in its own spawned child process, with a scrubbed environment and a hard timeout.

A warm spare (torch and Triton already imported, waiting for a job on stdin) hides the start-up cost: while
one candidate is evaluated, the next worker is already importing. On timeout the child's whole process
group is killed. Verdicts come back over a private pipe, never over stdout, which the candidate can print to.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .policy import check_source
from .results import Evaluation
from .task import baseline_source, read_task

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_KEEP = re.compile(r"^(PATH|HOME|LANG|LC_\w+|TMPDIR|TERM|USER|LD_LIBRARY_PATH|CUDA_\w+|NVIDIA_\w+|TRITON_\w+|"
                   r"HIP_\w+|ROCR_\w+|OMP_NUM_THREADS|MKL_\w+|OPENBLAS_\w+|PYTORCH_\w+|XDG_CACHE_HOME)$")
SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)


def scrubbed_env(backend: str) -> dict[str, str]:
    """Only what a kernel needs to run: no tokens, no API keys, nothing the candidate could use."""
    env = {k: v for k, v in os.environ.items() if _KEEP.match(k) and not SECRET_NAME.search(k)}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if backend == "interpret":
        env["TRITON_INTERPRET"] = "1"  # read when @triton.jit runs: must be set before any kernel import
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None  # loaded here: no imports after fork
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: be killed when kernelsmith dies (its own session escapes the group kill)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Worker:
    def __init__(self, backend: str, log_dir: Path):
        read_fd, write_fd = os.pipe()
        self.log = tempfile.NamedTemporaryFile(dir=log_dir, prefix="worker-", suffix=".log", delete=False)
        env = scrubbed_env(backend)
        env["KS_RESULT_FD"] = str(write_fd)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runners.worker"], stdin=subprocess.PIPE, stdout=self.log,
            stderr=subprocess.STDOUT, env=env, pass_fds=(write_fd,), start_new_session=True, cwd=log_dir,
            preexec_fn=_die_with_parent,
        )
        os.close(write_fd)
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
        self._reader.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            while chunk := pipe.read(65536):
                self._chunks.append(chunk)

    def run(self, job: dict, timeout: float) -> Evaluation:
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return Evaluation(stage="timeout", error=f"killed after {timeout:.0f} s (hard timeout)")
        except BrokenPipeError:
            self.proc.wait()
        self._reader.join(timeout=10)
        raw = b"".join(self._chunks)
        if not raw:
            return Evaluation(stage="crashed", error=f"worker exited with code {self.proc.returncode} and no "
                                                    f"verdict; last output:\n{self.output_tail()}")
        try:
            verdict = json.loads(raw)
            if verdict.get("token") != job["token"]:
                raise ValueError("the verdict does not carry this job's token")
            return Evaluation.from_dict(verdict["evaluation"])
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return Evaluation(stage="crashed", error=f"unreadable or forged verdict ({exc}); worker exited with "
                                                    f"code {self.proc.returncode}")

    def output_tail(self, lines: int = 20) -> str:
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


class Evaluator:
    """Evaluates candidate sources for one task bundle, one spawned process per candidate."""

    def __init__(self, bundle: Path, backend: str, timeout: float = 300.0, trials: int = 3, spare: bool = True):
        self.bundle = Path(bundle)
        self.backend = backend
        self.timeout = timeout
        self.trials = trials
        self.spec = read_task(self.bundle)
        self.baseline = baseline_source(self.bundle, self.spec)
        self._log_dir = Path(tempfile.mkdtemp(prefix="ks-workers-"))
        self._use_spare = spare
        self._spare: _Worker | None = None

    def _take_worker(self) -> _Worker:
        worker = self._spare or _Worker(self.backend, self._log_dir)
        self._spare = _Worker(self.backend, self._log_dir) if self._use_spare else None
        return worker

    def evaluate(self, source: str, seed: int, *, time_it: bool = True, case_set: str = "cases",
                 trials: int | None = None) -> Evaluation:
        violations = check_source(source, self.baseline, self.spec.entry)
        if violations:
            return Evaluation(stage="policy", error="; ".join(map(str, violations)))
        job = {"bundle": str(self.bundle), "source": source, "seed": seed, "trials": trials or self.trials,
               "backend": self.backend, "time": time_it, "case_set": case_set, "token": secrets.token_hex(16),
               "workdir": str(self._log_dir)}
        worker = self._take_worker()
        try:
            result = worker.run(job, self.timeout)
            if result.stage == "crashed" or "harness-error" in result.notes:
                result.notes.append(f"worker output:\n{worker.output_tail()}")
            return result
        finally:
            worker.close()

    def close(self) -> None:
        if self._spare:
            self._spare.close()
            self._spare = None
        shutil.rmtree(self._log_dir, ignore_errors=True)  # worker logs and the work folders of killed workers

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
