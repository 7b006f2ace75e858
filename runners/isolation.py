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
from dataclasses import dataclass
from pathlib import Path

# Environment names that may hold credentials: never passed to a worker, a test run or the target's code.
SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)

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
        """Kill every process of a finished candidate's user (children that escaped); returns how many."""
        if uid is None:
            return 0
        killed = 0
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                uid_line = next(line for line in status.read_text().splitlines() if line.startswith("Uid:"))
                if int(uid_line.split()[1]) == uid:
                    os.kill(int(status.parent.name), signal.SIGKILL)
                    killed += 1
            except (OSError, ValueError, StopIteration, IndexError):
                continue
        return killed
