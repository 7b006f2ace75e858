"""Worker processes: how kernelsmith starts them and talks to them.

Workers are spawned (never forked) as ``python -m runners.worker`` with a scrubbed environment (no tokens or
keys), their own process group, a parent-death signal, an address-space limit where the backend has one,
and, for candidates when kernelsmith is root, another user (runners/isolation.py). They talk over two
private pipes; stdout and stderr go to a log file. Every reply must echo its request's sequence number.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .backends import Backend, get_backend
from .hash_tree import seed_cache
from . import litter, syscalls
from .armed import MAX_THREADS
from .isolation import Isolation, without_credentials
from .preload import ENV as PRELOAD_ENV
from .task import BASELINE_DIR
from .stopped import cpu_times, wait_stopped
from .wire import Channel, PeerGone, WireError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# how long a paused worker's threads may take to stop (the judge waits for them; one still running after this is
# refused: a thread inside a long system call runs on after SIGSTOP, runners/stopped.py)
STOP_WAIT_S = 2.0
_KEEP = re.compile(r"^(PATH|HOME|LANG|LC_\w+|TMPDIR|TERM|USER|LD_LIBRARY_PATH|CUDA_\w+|NVIDIA_\w+|TRITON_\w+|"
                   r"HIP_\w+|ROCR_\w+|MACA_\w+|OMP_NUM_THREADS|MKL_\w+|OPENBLAS_\w+|PYTORCH_\w+|XDG_CACHE_HOME)$")
START_TIMEOUT = 180.0  # importing torch on a cold machine


def scrubbed_env(backend: str | Backend, extra: dict | None = None) -> dict[str, str]:
    """Only what a kernel needs to run: no tokens, no API keys, nothing the candidate could use. ``extra`` is
    the config's `env:` (what the target's own code needs to import), without names that look like secrets and
    without kernelsmith's own variables; the backend's settings win over it."""
    backend = get_backend(backend) if isinstance(backend, str) else backend
    env = without_credentials({k: v for k, v in os.environ.items() if _KEEP.match(k)})
    env.update(without_credentials({k: v for k, v in (extra or {}).items()
                                    if not str(k).startswith("KS_") and str(k) != "PYTHONPATH"}))
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return backend.worker_env(env)


_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None  # loaded here: no imports after fork
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4
# A candidate's open files, soft and hard: the usual default, under which CUDA and Triton run. It also bounds the files
# its user may keep in flight over unix sockets (the kernel refuses past the sender's limit), where no table lists
# them: timerfds in flight, all due at once, cost about 150 ns each of one interrupt on the core that armed them, and
# the limit inherited from the judge (20000 on the CI machine, often 1048576 in a container) let 20000 stall the core
# beside a stopped holder for 3-4 ms (tests/test_judge_attacks_round30.py)
CANDIDATE_OPEN_FILES = 1024
# Signals queued to a candidate's processes (RLIMIT_SIGPENDING, counted over its user's): a stop signal sent to a
# process with SIGCONT pending walks its whole queue inside the sending timer's interrupt; the limit inherited from the
# judge (96362 on the CI machine, about 500000 on a host of 128 GiB) let one walk take 1-2 ms
# (tests/test_judge_attacks_round31.py). A worker keeps a handful queued; POSIX timers count here too (one entry each),
# well within it at armed.MAX_TIMERS. The limit binds real-time signals only: the kernel queues a standard one sent by
# kill whatever the count, one of each number a queue and a queue a thread (1400-odd with 45 threads, round 32), which
# the held stop bounds (armed.MAX_QUEUED_SIGNALS); no walk of them is reachable without a ptrace stop, refused
CANDIDATE_PENDING_SIGNALS = 256


def _child_setup(address_space: int | None = None, candidate: bool = False, tasks: int | None = None) -> None:
    """In the child, before exec: die with kernelsmith, and stay within the backend's memory limit (the worker
    makes itself non-dumpable after exec, which resets that flag); a candidate's, without the calls whose requests
    outlive every listing (runners/syscalls.py), with at most ``CANDIDATE_OPEN_FILES`` open files (which also bound
    those its user may keep in flight), with at most ``CANDIDATE_PENDING_SIGNALS`` signals queued to its user's
    processes (a stop signal walks the whole queue in the interrupt that sends it, round 31), and, behind the uid
    wall, with at most ``tasks`` processes and threads of its user (``RLIMIT_NPROC``: the judge refuses past
    ``armed.MAX_THREADS`` with a reason; this keeps a candidate from making tens of thousands that every scan of the
    judge and every signal then walks)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if address_space is not None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    if tasks is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
    if candidate:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        files = CANDIDATE_OPEN_FILES if hard == resource.RLIM_INFINITY else min(CANDIDATE_OPEN_FILES, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
        pending = resource.getrlimit(resource.RLIMIT_SIGPENDING)[1]
        pending = CANDIDATE_PENDING_SIGNALS if pending == resource.RLIM_INFINITY else min(CANDIDATE_PENDING_SIGNALS,
                                                                                            pending)
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (pending, pending))
        syscalls.install()


def read_baseline(bundle: Path) -> dict[str, bytes]:
    """The bundle's baseline files, read once: workers are made from this copy, so a file rewritten on disk
    later (by anyone) never reaches the oracle."""
    root = Path(bundle) / BASELINE_DIR
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def materialize(files: dict[str, bytes], module: str, dest: Path, package: str, source: str | None) -> str:
    """Write the baseline's files under a top-level ``package`` in ``dest`` (the kernel module replaced by
    ``source``); returns the dotted name of the kernel module there."""
    root = dest / package
    if root.exists():
        shutil.rmtree(root)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    if source is not None:
        (root / module).write_text(source)
    for d in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    return ".".join([package, *Path(module).with_suffix("").parts])


class WorkerProcess:
    """One spawned ``python -m runners.worker`` and its two pipes."""

    def __init__(self, backend: Backend, root: Path, role: str, python: str | None = None, uid: int | None = None,
                 env: dict | None = None, preload: str | None = None):
        self.role = role
        self.uid = uid  # None: the judge's own user
        self.dir = Path(tempfile.mkdtemp(prefix=f"{role}-", dir=root))
        self.outbox = self.dir / "out"
        self.workdir = self.dir / "work"
        self.outbox.mkdir()
        self.workdir.mkdir()
        self.log_path = self.dir / "worker.log"
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = scrubbed_env(backend, env)
        env.update(KS_REQ_FD=str(req_r), KS_REP_FD=str(rep_w))
        if preload:  # modules to import while the worker waits
            env[PRELOAD_ENV] = preload
        if uid is not None:  # its own home, name and caches, in its own folder (the uid has no passwd entry)
            env.update(HOME=str(self.workdir), TRITON_CACHE_DIR=str(self.workdir / ".triton"),
                       XDG_CACHE_HOME=str(self.workdir / ".cache"), USER=f"ks{uid}", LOGNAME=f"ks{uid}",
                       TORCHINDUCTOR_CACHE_DIR=str(self.workdir / ".inductor"))
            if role == "candidate" and backend.timed:
                seed_cache(self.workdir / ".triton")  # the judge's own kernels arrive compiled
        Isolation.hand_over(self.dir, uid)
        self.seq = 0
        self.failed = False  # its last request got no well-formed reply
        self._log_fd: int | None = None
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [python or sys.executable, "-m", "runners.worker"], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=env, pass_fds=(req_r, rep_w), start_new_session=True,
                cwd=self.workdir, preexec_fn=functools.partial(
                    _child_setup, backend.address_space_limit, role == "candidate",
                    4 * MAX_THREADS if role == "candidate" and uid is not None else None),
                **Isolation.popen_args(uid))
        os.close(req_r)
        os.close(rep_w)
        # The log is read through a descriptor of the file made here: whatever is put at its path later (a FIFO,
        # a link to /dev/zero) is never opened by the judge.
        self._log_fd = os.open(self.log_path, os.O_RDONLY)
        self.channel = Channel(rep_r, req_w)
        self.deadline: float | None = None
        self.ready_info: dict | None = None
        self.cache: dict = {}  # the judge's copy of answers that cannot change for this worker (the oracle's)

    def wait_ready(self, timeout: float) -> dict:
        if self.ready_info is None:
            self.ready_info = self.channel.recv(timeout)
        return self.ready_info

    def request(self, op: str, *, spin_s: float = 0.0, **fields) -> dict:
        """Send one request and wait for its reply until the evaluation's deadline. Every reply must echo the
        request's sequence number: a reply slipped into the pipe out of turn is a protocol error."""
        self.send(op, **fields)
        return self.receive(spin_s)

    def send(self, op: str, **fields) -> None:
        """The first half of ``request``: the judge may send to both workers before it waits for either."""
        self.seq += 1
        self.failed = True  # until a well-formed reply arrives: a broken channel is this worker's
        try:
            self.channel.send({"op": op, "seq": self.seq, **fields})
        except (BrokenPipeError, OSError):
            raise PeerGone() from None

    def receive(self, spin_s: float = 0.0) -> dict:
        """The reply to the request sent last, until the evaluation's deadline (polled ``spin_s`` before sleeping)."""
        left = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        reply = self.channel.recv(left, spin_s)
        if reply.get("seq") != self.seq:
            raise WireError(f"reply out of turn (sequence {reply.get('seq')!r}, expected {self.seq})")
        self.failed = False
        return reply

    def output_tail(self, lines: int = 20, most: int = 64 << 10) -> str:
        if self._log_fd is None:
            return ""
        try:
            size = os.fstat(self._log_fd).st_size
            data = os.pread(self._log_fd, min(size, most), max(0, size - most))
        except OSError:
            return ""
        return "\n".join(data.decode(errors="replace").strip().splitlines()[-lines:])

    def pause(self) -> None:
        """Stop every process of the worker's group (SIGSTOP): while the judge times the oracle, nothing of a
        candidate's runs on the host or queues new work on the device."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def still_running(self, within_s: float = STOP_WAIT_S) -> list[str]:
        """After ``pause``: the worker's threads (its group's, and its user's behind the uid wall) that have not
        stopped within ``within_s`` (runners/stopped.py); empty when all have. Behind the uid wall the stop is
        first sent to every process of the user at once (``Isolation.signal_user`` ``at_once``)."""
        Isolation.signal_user(self.uid, signal.SIGSTOP, at_once=True)
        return wait_stopped(self.proc.pid, self.uid, within_s)

    def cpu_times(self) -> dict:
        """The CPU time of each of the worker's threads (its group's, and its user's behind the uid wall)."""
        return cpu_times(self.proc.pid, self.uid)

    def _signal(self, sig: int) -> None:
        self._signal_group(sig)
        # Behind the uid wall, everything of the candidate's user: a helper it started in a session of its own is
        # outside the worker's group, and could load the machine exactly while the oracle is timed. (As the
        # judge's own user this cannot be told apart from the judge: tests/test_judge_attacks_round3.py.)
        Isolation.signal_user(self.uid, sig)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _signal_group(self, sig: int) -> None:
        """``sig`` to the worker's process group, whether or not its leader is still alive: a worker that started
        a child and ended leaves the child in the group (Linux does not hand out the group's number to another
        process while any member lives, so the signal reaches no stranger)."""
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)
        self.proc.wait()
        Isolation.kill_leftovers(self.uid)  # children that left the process group
        litter.sweep(self.uid)  # and what its user wrote where every user may (/dev/shm, /tmp)

    def exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def close(self) -> None:
        """Ended, not asked: a worker keeps nothing worth a goodbye, and waiting for one (a spare still importing
        torch, say) cost up to 5 s a worker."""
        self.kill()
        self.channel.close()
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None
        shutil.rmtree(self.dir, ignore_errors=True)


