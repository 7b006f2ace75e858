"""Where a job's pipeline runs. `local` (the embedded default): this machine, one job per GPU slot (or one on
the CPU interpreter), each in a scrubbed subprocess. `actions` (self-hosted runners through
workflow_dispatch) plugs in behind the same `Dispatch` protocol.
"""
from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.errors import UserError

from .models import Job
from .runner import JobCancelled, JobProgress, fail, finish
from .states import FINAL, State
from .store import JobStore

log = logging.getLogger("kernelsmith.dispatch")

# Only these variables reach a worker: never the webhook secret, the App's key or an installation token.
WORKER_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "TRITON_INTERPRET",
              "TRITON_CACHE_DIR")


class RetryLater(Exception):
    """Raised by `JobHooks.prepare` when the job cannot start yet (a rate limit): it is queued again."""

    def __init__(self, message: str, at):
        super().__init__(message)
        self.at = at


@dataclass
class Prepared:
    target: Path
    out: Path
    backend: str  # the pipeline's backend: triton | interpret


class JobHooks(Protocol):
    """What the App does around a job (the dispatch itself knows nothing about GitHub)."""

    def prepare(self, job: Job) -> Prepared: ...   # checkout at the job's commit; may raise UserError
    def progress(self, job: Job) -> None: ...      # the status comment
    def publish(self, job: Job) -> None: ...       # an improved job: branch, push, pull request
    def finished(self, job: Job) -> None: ...      # a final state: the result comment, clean-up


class Dispatch(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def wake(self) -> None: ...


def make_dispatch(kind: str, **kwargs) -> Dispatch:
    if kind == "local":
        return LocalDispatch(**kwargs)
    if kind == "actions":
        raise UserError("KS_DISPATCH=actions is not built yet (it will send a workflow_dispatch of "
                        "kernelsmith-runner.yml to self-hosted runners labelled by backend)",
                        "Use KS_DISPATCH=local, the default.")
    raise UserError(f"unknown dispatch {kind!r}", "Use KS_DISPATCH=local.")


def worker_env(gpu: int | None) -> dict[str, str]:
    env = {k: os.environ[k] for k in WORKER_ENV if k in os.environ}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    elif "TRITON_INTERPRET" not in env:
        env["TRITON_INTERPRET"] = "1"
    return env


class LocalDispatch:
    def __init__(self, store: JobStore, hooks: JobHooks, pipeline: str, slots: list[int | None],
                 per_repo: int = 1, poll: float = 0.5):
        self.store, self.hooks, self.pipeline = store, hooks, pipeline
        self.slots, self.per_repo, self.poll = slots, per_repo, poll
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._publishing: set[int] = set()
        self._plock = threading.Lock()

    def start(self) -> None:
        for i, gpu in enumerate(self.slots):
            t = threading.Thread(target=self._loop, args=(gpu, i == 0), name=f"ks-slot-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        for t in self._threads:
            t.join(timeout=5)

    def wake(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def _loop(self, gpu: int | None, publisher: bool) -> None:
        while not self._stop.is_set():
            try:
                if publisher:
                    for job in self.store.publishing_due():
                        self._publish(job)
                job = self.store.claim_next(self.per_repo)
                if job is not None:
                    self.run(job, gpu)
                    continue
            except Exception:  # the loop must survive anything one job does
                log.exception("dispatch loop error")
            with self._wake:
                self._wake.wait(self.poll)

    def _publish(self, job: Job) -> None:
        with self._plock:
            if job.id in self._publishing:
                return
            self._publishing.add(job.id)
        try:
            self.hooks.publish(job)
            final = self.store.get(job.id)
            if final.state != State.publishing.value:
                self.hooks.finished(final)
        finally:
            with self._plock:
                self._publishing.discard(job.id)

    def run(self, job: Job, gpu: int | None) -> None:
        """Run one claimed job to a final state (or to publishing)."""
        self.store.enter_stage(job.id, "preflight")
        self._notify(job.id)
        try:
            prepared = self.hooks.prepare(self.store.get(job.id))
            outcome = self._run_worker(job, prepared, gpu)
        except JobCancelled as exc:
            outcome = None
            self.store.transition(job.id, State.cancelled, reason=str(exc))
        except RetryLater as exc:
            self.store.transition(job.id, State.queued, next_attempt_at=exc.at, reason=f"waiting: {exc}",
                                  attempts=max(job.attempts - 1, 0))
            self._notify(job.id)
            return
        except UserError as exc:
            outcome = None
            fail(self.store, job.id, str(exc))
        except Exception as exc:
            log.exception("job %d failed", job.id)
            outcome = None
            fail(self.store, job.id, f"{type(exc).__name__}: {exc}")
        if outcome is not None:
            kind = outcome.get("t")
            if kind == "result":
                finish(self.store, job.id, outcome["verdict"], outcome["reason"], Path(outcome["out"]), publish=True)
            else:
                fail(self.store, job.id, outcome.get("message") or "the job's worker ended without a result")
        current = self.store.get(job.id)
        if current.state == State.publishing.value:
            self._publish(current)
        elif current.state in {st.value for st in FINAL}:
            self.hooks.finished(current)

    def _notify(self, job_id: int) -> None:
        try:
            self.hooks.progress(self.store.get(job_id))
        except Exception:
            log.exception("status update for job %d failed", job_id)

    def _run_worker(self, job: Job, prepared: Prepared, gpu: int | None) -> dict:
        prepared.out.parent.mkdir(parents=True, exist_ok=True)
        spec = {"pipeline": self.pipeline, "kernel": job.kernel, "options": job.options or {},
                "target": str(prepared.target), "out": str(prepared.out), "backend": prepared.backend}
        r, w = os.pipe()
        try:
            with open(prepared.out.parent / "worker.log", "ab") as log_file:
                proc = subprocess.Popen([sys.executable, "-m", "bot.jobs.local_worker", "--fd", str(w),
                                         "--parent", str(os.getpid())],
                                        stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
                                        env=worker_env(gpu), pass_fds=(w,), start_new_session=True,
                                        cwd=str(prepared.out.parent))
        finally:
            os.close(w)
        progress = JobProgress(self.store, job.id, on_change=lambda j: self._notify(j.id))
        outcome: dict = {}
        with os.fdopen(r, "r") as events:
            proc.stdin.write(json.dumps(spec).encode())
            proc.stdin.close()
            try:
                buf = ""
                while True:
                    ready, _, _ = select.select([events], [], [], self.poll)
                    if not ready:
                        current = self.store.get(job.id)
                        if current.cancel_requested:
                            raise JobCancelled(f"cancelled during stage {current.stage}")
                        if proc.poll() is not None:
                            break
                        continue
                    chunk = os.read(events.fileno(), 65536).decode()
                    if not chunk:
                        break
                    buf += chunk
                    *lines, buf = buf.split("\n")
                    for line in lines:
                        outcome = self._event(progress, json.loads(line)) or outcome
            except BaseException:
                _kill(proc)
                raise
        proc.wait()
        return outcome or {"t": "error", "message": f"the job's worker exited with code {proc.returncode} "
                                                    "and no result (see worker.log)"}

    @staticmethod
    def _event(progress: JobProgress, msg: dict) -> dict | None:
        kind = msg.get("t")
        if kind == "stage":
            progress.stage(msg.get("text", ""), msg.get("name", ""))
        elif kind == "search":
            progress.search_started(msg["budget"])
        elif kind == "candidate":
            progress.candidate_count(msg.get("best"), msg.get("failures", 0))
        elif kind in ("result", "error"):
            return msg
        return None


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
