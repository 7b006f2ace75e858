"""The ``Evaluator``: kernelsmith's side of an evaluation, and the seam the rest of kernelsmith uses
(``evaluate(source) -> Evaluation``). It holds the judge (runners/judge.py) and two kinds of worker process
(runners/processes.py, runners/worker.py):

- one **oracle worker** per evaluator, long-lived, that only ever imports the baseline;
- one fresh **candidate worker** per candidate, with a warm spare (torch already imported) waiting.

Nothing a worker sends is unpickled or executed; a worker that breaks the protocol ends its evaluation.
"""
from __future__ import annotations

import logging
import threading
import os
import shutil
import sys
import tempfile
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import interrupts
from .autotune_pins import BaselinePins
from .backends import get_backend
from .backends.cuda import driver_version
from .isolation import SECRET_NAME, Isolation
from .judge import Exchange, Judge, Protocol
from .judge import evaluate as run_protocol
from .policy import check_source, defines_triton_kernel
from .preload import encode, host_imports
from .results import Environment, Evaluation
from .spare import Prefetch, SpareWorkers
from .processes import (_LIBC, _PR_SET_DUMPABLE, PROJECT_ROOT, START_TIMEOUT, WorkerProcess,
                        materialize, read_baseline, scrubbed_env)
from .task import REFERENCE_DIR, baseline_source, read_task
from .wire import PeerGone, PeerTimeout, WireError, shm_root, sweep_stale

__all__ = ["Evaluator", "SECRET_NAME", "scrubbed_env"]
log = logging.getLogger("kernelsmith.judge")
_SPAWNERS: dict[int, ThreadPoolExecutor] = {}


def _spawner() -> ThreadPoolExecutor:
    """The one thread that starts every worker, living as long as this process (see Evaluator._spawn); one per
    process id, since a forked child has none of its parent's threads."""
    return _SPAWNERS.setdefault(os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="ks-spawn"))

class Evaluator(SpareWorkers):
    """Evaluates candidate sources for one task bundle (``evaluate(source) -> Evaluation``)."""

    def __init__(self, bundle: Path | str, backend: str, timeout: float = 300.0, trials: int = 3, spare: bool = True,
                 protocol: Protocol | None = None):
        self.bundle = Path(bundle).resolve()
        self.backend = get_backend(backend)
        self.timeout = timeout
        self.trials = trials
        self.spec = read_task(self.bundle)
        self.baseline = baseline_source(self.bundle, self.spec)
        self._baseline_files = read_baseline(self.bundle)
        self._pins = BaselinePins(self.bundle)  # the baseline's autotune picks, once per bundle
        warm = host_imports(self.baseline, own=("ks_baseline", "ks_candidate"))
        device = self.backend.device if self.backend.timed else None
        self._preload = encode(self.spec.import_paths, warm, not self.backend.timed, device) \
            if warm or device == "cuda" else None
        self.protocol = protocol or Protocol()
        self.search_protocol = Protocol.search() if protocol is None else protocol
        sweep_stale(shm_root())
        self.root = Path(tempfile.mkdtemp(prefix=f"ks-judge-{os.getpid()}-", dir=shm_root()))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.root), True)  # even if never closed
        self.exchange = Exchange(self.root / "exchange")
        self.exchange.root.mkdir()
        import torch

        needed = [PROJECT_ROOT / "runners" / "worker.py", Path(torch.__file__),
                  Path(self.spec.python or sys.executable).resolve(), *map(Path, self.spec.import_paths)]
        self.isolation = Isolation.choose(needed)
        if os.environ.get("KS_REQUIRE_ISOLATION") == "1" and not self.isolation.active:
            self.isolation.release()
            shutil.rmtree(self.root, ignore_errors=True)
            raise IsolationRequired(f"KS_REQUIRE_ISOLATION=1, but {self.isolation.describe}. Run kernelsmith as "
                                    f"root with a Python interpreter and packages that other users can read.")
        self._isolation_checked = False
        if self.isolation.active:  # the candidates' users may enter the root and read the exchange, nothing else
            os.chmod(self.root, 0o711)
            os.chmod(self.exchange.root, 0o755)
        self.pair_trials = False  # tests: a trial's two calls at once without the uid wall (runners/judge.py)
        self._use_spare = spare
        self._spare: WorkerProcess | None = None
        self._oracle: WorkerProcess | None = None
        self._oracle_info: dict = {}
        self._peak: tuple[float, int] | None = None
        self._device_info: dict = {}
        self.started = 0  # candidate workers started (for the throughput benchmark)
        self._lock = threading.Lock()  # the spare and the prefetch: the search prefetches from its own thread
        self._prefetch: Prefetch | None = None
        self._wanted: str | None = None  # the source to prefetch once the next evaluation has taken its worker
        self._screening = False  # a screening evaluation holds its candidate worker (a prefetch may start now)
        self._warmer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ks-warm")
        if _LIBC is not None:  # the judge too: a worker of the same user may not open its pipes through /proc
            _LIBC.prctl(_PR_SET_DUMPABLE, 0)
        self._ambient = interrupts.Ambient()  # the machine's interrupts a ms (interrupts.storm), the least seen:
        for _ in range(3):  # first before any candidate's process exists, then before each candidate
            self._ambient.sample()
        if spare:  # both start importing torch now, in parallel, before the first evaluation needs them
            self._oracle = self._spawn("oracle")
            self._spare = self._spawn("candidate")

    # ---- workers ----------------------------------------------------------------------------------------
    def _spawn(self, role: str) -> WorkerProcess:
        """Workers are started from the evaluator's own thread: a worker dies with the thread that started it
        (the parent-death signal follows the thread, not the process), and the search evaluates in pool threads
        that end with the search, which killed the warm spare just before the champion's re-verification on the
        H200 ('PeerGone ... killed by SIGKILL')."""
        uid = None
        if role == "candidate":
            self.started += 1
            uid = self.isolation.next_uid()
        return _spawner().submit(WorkerProcess, self.backend, self.root, role, self.spec.python, uid,
                                    self.spec.env, self._preload).result()

    def _load(self, worker: WorkerProcess, package: str, source: str | None, reference: bool = False) -> dict:
        """The judge writes the module (and the baseline's helpers) into the worker's folder; the worker only
        imports it. A candidate's worker is never told where the bundle is."""
        worker.wait_ready(START_TIMEOUT)
        module_name = materialize(self._baseline_files, self.spec.module, worker.workdir, package, source)
        Isolation.hand_over(worker.workdir, worker.uid)
        return worker.request(
            "load", device=self.backend.device, exchange=str(self.exchange.root), outbox=str(worker.outbox),
            workdir=str(worker.workdir), import_paths=self.spec.import_paths, module_name=module_name,
            entry=self.spec.entry, interpret=not self.backend.timed,
            reference=self.spec.reference if reference else None,
            reference_root=str(self.bundle / REFERENCE_DIR) if reference else None, compile=self.backend.timed,
            pin=self._pins.state if package == "ks_baseline" and self.backend.timed else None)

    def _oracle_worker(self) -> WorkerProcess:
        if self._oracle is not None and self._oracle.alive() and self._oracle_info.get("ok"):
            return self._oracle
        if self._oracle is None or not self._oracle.alive():
            if self._oracle is not None:
                self._oracle.close()
            self._oracle = self._spawn("oracle")
        self._oracle.deadline = time.monotonic() + self.timeout + START_TIMEOUT
        t0 = time.perf_counter()
        info = self._load(self._oracle, "ks_baseline", None, reference=True)
        log.info("oracle worker: ready and baseline loaded after %.1f s (%s)", time.perf_counter() - t0,
                 "ok" if info.get("ok") else "failed")
        if not info.get("ok"):
            message = self._baseline_error(info, self._oracle)
            self._oracle.close()
            self._oracle = None
            raise BaselineError(message)
        self._oracle_info = info
        if self.backend.timed and self._peak is None:
            bw = self._oracle.request("bandwidth")
            self._peak = (float(bw["gbs"]), int(bw["l2_bytes"]))
            self._device_info = bw
        return self._oracle

    def _baseline_error(self, info: dict, worker: WorkerProcess) -> str:
        text = f"{info.get('error', '')}\n{info.get('traceback', '')}".strip()
        text = text.replace(str(worker.workdir / "ks_baseline") + "/", "")
        return (f"the baseline module {self.spec.module} (or a helper it imports) failed to import in a worker "
                f"({self.backend.name}): {text}")

    def _check_isolation(self, worker: WorkerProcess) -> WorkerProcess:
        """Once, before any candidate code runs: a worker under the candidates' user must start, reach the
        device and write its folder. If it cannot (device files closed to other users, say), candidates run
        as the judge's user and the report says why."""
        self._isolation_checked = True
        try:
            worker.deadline = time.monotonic() + START_TIMEOUT
            worker.wait_ready(START_TIMEOUT)
            reply = worker.request("probe", device=self.backend.device, outbox=str(worker.outbox))
            if reply.get("ok") and (worker.outbox / "probe").is_file():
                return worker
            problem = str(reply.get("error", "no probe file"))
        except (PeerTimeout, PeerGone, WireError) as exc:
            problem = f"{type(exc).__name__}: {worker.output_tail(3)}"
        worker.close()
        if self._spare is not None and self._spare is not worker:
            self._spare.close()
            self._spare = None
        self.isolation.release()
        self.isolation = Isolation(None, f"a worker as uid {worker.uid} could not run: {problem[:200]}")
        return self._spawn("candidate")

    def _environment(self) -> Environment:
        info = (self._oracle.ready_info if self._oracle else None) or {}
        env = Environment(backend=self.backend.name, device="cpu (Triton interpreter)",
                          torch=info.get("torch", ""), triton=info.get("triton", ""),
                          python=sys.version.split()[0], warp_size=self.backend.warp_size,
                          isolation=self.isolation.describe)
        if self.backend.timed:
            env.device = self._device_info.get("device", "")
            env.cuda = self._device_info.get("cuda")
            env.peak_bandwidth_gbs = self._peak[0] if self._peak else None
            env.driver = driver_version()
        return env

    # ---- the seam -----------------------------------------------------------------------------------------
    def evaluate(self, source: str, seed: int, *, time_it: bool = True, case_set: str = "cases",
                 trials: int | None = None, reference: bool = False, static_policy: bool = True,
                 protocol: str = "verify") -> Evaluation:
        """``protocol``: "verify" (the full protocol, the default) or "search" (the screening protocol the search
        runs on every candidate, ``Protocol.search()``; a champion is always re-run with "verify").
        ``static_policy=False`` sends the source straight to a worker: tests use it to show that the judge
        holds without the policy, which is only a cheap first filter and a source of good error messages."""
        if protocol not in ("verify", "search"):
            raise ValueError(f"protocol must be 'verify' or 'search', not {protocol!r}")
        started = time.perf_counter()
        violations = check_source(source, self.baseline, self.spec.entry) if static_policy else []
        if violations:
            return Evaluation(stage="policy", error="; ".join(map(str, violations)))

        try:
            oracle = self._oracle_worker()
        except BaselineError as exc:
            return Evaluation(stage="baseline", error=str(exc), notes=["harness-error"])
        except (PeerTimeout, PeerGone, WireError) as exc:
            tail = self._oracle.output_tail() if self._oracle else ""
            return Evaluation(stage="baseline", error=f"the oracle worker failed to start ({type(exc).__name__}):\n"
                                                      f"{tail}", notes=["harness-error"])
        cases = self.spec.held_out if case_set == "held_out" else self.spec.cases
        candidate, prefetched = self._take_candidate(source, protocol == "search" and case_set == "cases")
        deadline = time.monotonic() + self.timeout
        ev = Evaluation(stage="compile", protocol=protocol)
        try:
            t0 = time.perf_counter()
            if prefetched is not None:  # loaded (and compiled) while the evaluation before was judged
                info, warm, seconds = prefetched.result(timeout=max(1.0, deadline - time.monotonic()))
                ev.phases.update(prefetch_wait=time.perf_counter() - t0, prefetch=seconds)
                if warm is not None:  # what it met is said, not judged: the trials meet it again on real inputs
                    ev.phases["prefetch.warm"] = float(warm.get("seconds", 0.0)) if warm.get("ok") else 0.0
                    if not warm.get("ok") or warm.get("error_count"):
                        ev.notes.append(f"prefetch: compiling ahead met {warm.get('error_count', 1)} error(s): "
                                        f"{str(warm.get('errors') or warm.get('error'))[:300]}")
            else:
                candidate.deadline = deadline
                candidate.wait_ready(START_TIMEOUT)
                t1 = time.perf_counter()
                info = self._load(candidate, "ks_candidate", source)
                ev.phases.update(worker=t1 - t0, load=time.perf_counter() - t1)
            oracle.deadline = candidate.deadline = deadline
            if not info.get("ok"):
                ev.error = f"import failed: {info.get('error')}\n{info.get('traceback', '')}".strip()
                ev.error = ev.error.replace(str(candidate.workdir / "ks_candidate") + "/", "")
            else:
                ev.stage = "correctness"
                judge = Judge(self.spec, self.backend, oracle, candidate, self.exchange, self.backend.device,
                              self.protocol if protocol == "verify" else self.search_protocol)
                judge.defines_kernel = defines_triton_kernel(source)  # the launch record must agree with the code
                judge.concurrent = self.isolation.active or self.pair_trials  # the oracle's folder out of reach
                judge.bystanders = [self._spare] if self._spare is not None else []
                judge.ambient_irq = self._ambient.sample()
                run_protocol(judge, cases, int(seed), trials or self.trials, time_it, reference, ev, self._peak)
                if self.backend.timed:  # the oracle's picks kept for the bundle's later oracles; said where they held
                    ev.notes += self._pins.after(judge.autotune, self._oracle_info.get("pinned"))
                if ev.stage == "baseline":
                    ev.notes.append("harness-error")
        except (PeerTimeout, TimeoutError):
            if oracle.failed:
                ev = Evaluation(stage="baseline", cases=ev.cases, notes=["harness-error"],
                                error=f"the oracle worker (the baseline) did not answer within {self.timeout:.0f} s")
            else:
                ev = Evaluation(stage="timeout", error=f"killed after {self.timeout:.0f} s (hard timeout)",
                                cases=ev.cases)
            self._restart_oracle_if_busy()
        except (PeerGone, WireError, OSError, KeyError, TypeError, ValueError, AttributeError, IndexError,
                RecursionError, OverflowError, RuntimeError) as exc:
            # A reply that is not what the protocol says (missing fields, wrong types, out of turn) is the
            # fault of the worker whose channel broke; the judge never crashes on it. An oracle whose channel
            # broke is replaced: it may be out of step for good.
            if oracle.failed or not oracle.alive():
                tail = oracle.output_tail()
                self._restart_oracle_if_busy()
                ev = Evaluation(stage="baseline", cases=ev.cases, notes=["harness-error"],
                                error=f"the oracle worker broke the protocol or died ({type(exc).__name__}: {exc}); "
                                      f"it is replaced; last output:\n{tail}")
            else:
                ev = Evaluation(stage="crashed", cases=ev.cases,
                                error=f"the candidate's worker broke the protocol or died ({type(exc).__name__}: "
                                      f"{exc}); {candidate.exit_description()}; last output:\n{candidate.output_tail()}")
        finally:
            candidate.kill()  # no goodbye: a candidate's process is not asked, it is ended
            candidate.close()
            oracle.deadline = None
            if oracle.failed:  # left mid-request, whatever the verdict: its late reply would sink the next evaluation
                self._restart_oracle_if_busy()
            with self._lock:
                self._screening = False
        ev.env = self._environment()
        ev.protocol = protocol
        ev.duration_s = time.perf_counter() - started
        log.info("evaluated: %s%s in %.1f s (%s)", ev.stage, "" if ev.ok else " (refused)", ev.duration_s,
                 ", ".join(f"{k} {v:.1f} s" for k, v in ev.phases.items()))
        return ev

    def _restart_oracle_if_busy(self) -> None:
        """After a timeout the oracle may be mid-request: start a clean one next time."""
        if self._oracle is not None:
            self._oracle.close()
            self._oracle = None
            self._oracle_info = {}

    def close(self) -> None:
        self._warmer.shutdown(wait=False, cancel_futures=True)
        for worker in (self._spare, self._oracle):
            if worker is not None:
                worker.close()
        self._spare = self._oracle = None
        self.isolation.release()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Evaluator:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class IsolationRequired(RuntimeError):
    """The deployment asked for candidates under another user, and this machine cannot do it."""


class BaselineError(Exception):
    pass
