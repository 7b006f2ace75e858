"""Another user for candidate workers: the operating system's wall between the candidate and the judge.

When kernelsmith runs as root (a GPU runner's container, this project's CI), each evaluator picks an unused
uid and runs its candidate workers under it. That user cannot read or write the judge's or the oracle's
memory (``/proc/<pid>/mem``), open their pipes (``/proc/<pid>/fd``), signal them, or write the bundle, the
exchange files or the oracle's outputs; and every process it leaves behind (a child that escaped the
process group) is killed at the end of each evaluation, found by its uid.

When kernelsmith is not root, candidates run as the same user: the judge and the oracle are then only
protected by being non-dumpable, by checksums on everything the oracle sends, and by sequence numbers on
the pipes. ``Isolation.describe`` says which, and the report shows it.
"""
from __future__ import annotations

import os
import random
import re
import signal
import stat
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

# Environment names that may hold credentials: never passed to a worker, a test run or the target's code.
SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)


def without_credentials(env: dict) -> dict[str, str]:
    """``env`` without the names that may hold credentials (for workers, tests and any run of the target's code)."""
    return {str(k): str(v) for k, v in env.items() if not SECRET_NAME.search(str(k))}

UID_RANGE = (62000, 64999)


def _readable_by_others(path: Path) -> bool:
    """Every folder from / to ``path`` can be entered by others, and ``path`` itself read."""
    try:
        for parent in [*reversed(path.parents)]:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(path).st_mode
        return bool(mode & stat.S_IROTH) and (not stat.S_ISDIR(mode) or bool(mode & stat.S_IXOTH))
    except OSError:
        return False


def _uid_in_use(uid: int) -> bool:
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("Uid:"):
                    if int(line.split()[1]) == uid:
                        return True
                    break
        except (OSError, ValueError, IndexError):
            continue
    return False


CLAIMS = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")


def _claim(uid: int) -> bool:
    """Reserve ``uid`` for this process (evaluators started together must not share one: each kills every
    process of its uids). A claim whose owner is gone is taken over."""
    path = CLAIMS / f"ks-uid-{uid}.claim"
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            try:
                owner = int(path.read_text() or "0")
            except (OSError, ValueError):
                owner = 0
            if owner and Path(f"/proc/{owner}").exists():
                return False
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def release(uid: int | None) -> None:
    if uid is None:
        return
    path = CLAIMS / f"ks-uid-{uid}.claim"
    try:
        if path.read_text() == str(os.getpid()):
            path.unlink()
    except OSError:
        pass


@dataclass
class Isolation:
    """Two uids, taken in turn: the warm spare never shares a user with the candidate being evaluated."""

    uid: int | None = None
    reason: str = ""
    other: int | None = None

    def release(self) -> None:
        """Give both claimed uids back (runners/isolation.py ``release``)."""
        release(self.uid)
        release(self.other)

    def next_uid(self) -> int | None:
        if not self.active:
            return None
        self.uid, self.other = self.other, self.uid
        return self.other

    @classmethod
    def choose(cls, needed: list[Path]) -> Isolation:
        if not sys.platform.startswith("linux"):
            return cls(None, "not Linux")
        if os.environ.get("KS_ISOLATION", "uid") == "off":
            return cls(None, "turned off by KS_ISOLATION=off")
        if os.geteuid() != 0:
            return cls(None, "kernelsmith is not root, so it cannot run candidates as another user")
        unreadable = [str(p) for p in needed if not _readable_by_others(p)]
        if unreadable:
            return cls(None, f"{unreadable[0]} cannot be read by other users")
        span = UID_RANGE[1] - UID_RANGE[0]
        start = random.randrange(span)
        free = []
        for offset in range(span):
            uid = UID_RANGE[0] + (start + offset) % span
            if not _uid_in_use(uid) and _claim(uid):
                free.append(uid)
            if len(free) == 2:
                return cls(free[0], "", free[1])
        for uid in free:
            release(uid)
        return cls(None, "no free uid")

    @property
    def active(self) -> bool:
        return self.uid is not None

    @property
    def describe(self) -> str:
        if self.active:
            low, high = sorted((self.uid, self.other))
            return f"candidates ran as users {low}/{high}, apart from the judge and the oracle"
        return f"candidates ran as the judge's own user ({self.reason})"

    @staticmethod
    def popen_args(uid: int | None) -> dict:
        return {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}

    @staticmethod
    def hand_over(path: Path, uid: int | None) -> None:
        """Give a candidate's own folder (and everything in it) to its user."""
        if uid is None:
            return
        for root, dirs, files in os.walk(path):
            os.chown(root, uid, uid)
            for name in dirs + files:
                os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)

    @staticmethod
    def kill_leftovers(uid: int | None) -> int:
        """Kill every process of a finished candidate's user (children that escaped); returns how many were seen.
        A process that keeps starting a copy of itself and exiting is never where one pass over /proc looks, so
        the kill is ``kill(-1, SIGKILL)`` sent by a short-lived process running as that user (the kernel signals
        every process of the user at once, under its task-list lock), repeated until a pass finds none."""
        if uid is None:
            return 0
        seen = 0
        for attempt in range(5):
            pids = uid_processes(uid)
            # A scan can miss a process (one between fork and exec shows as root's in /proc), so the first kill is
            # sent whatever the scan saw.
            if not pids and attempt > 0:
                break
            seen += len(pids)
            if os.geteuid() == 0:
                _signal_all_as(uid, signal.SIGKILL)
            for pid in pids:  # and directly, for what the user's own kill could not reach
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        return seen

    @staticmethod
    def signal_user(uid: int | None, sig: int, at_once: bool = False) -> None:
        """Send ``sig`` to every process of a candidate's user (two passes over /proc, the second for what the
        first let fork): pausing a candidate stops what it started in sessions of its own too. ``at_once``: first
        ``kill(-1, sig)`` as the user, which reaches forks in flight too (helpers that hop, round 22). That forks the
        judge's process, tens of milliseconds on a GPU host: the judge asks for it only where it holds the stop
        through the oracle's round (``WorkerProcess.still_running``), never on every sample's pause (on the H200 a
        sample's round trip grew from about 25 ms to 85, and the samples' spread from under 1 % to 3-12 %: an idle
        device between samples)."""
        if uid is None:
            return
        if at_once and os.geteuid() == 0:
            _signal_all_as(uid, sig)
        for _ in range(2):
            for pid in uid_processes(uid):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass


def uid_processes(uid: int) -> list[int]:
    """Pids of the processes whose effective user is ``uid`` (the owner of /proc/PID)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


def _signal_all_as(uid: int, sig: int) -> None:
    """``kill(-1, sig)`` from a forked child that becomes ``uid``: every process of that user at once (the kernel
    signals them under its task-list lock, so a process that keeps forking and exiting is reached too). The child only
    makes system calls before ``_exit`` (no interpreter, which other users may not be able to run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: the child runs no Python code
        pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, sig)
        finally:
            os._exit(0)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
