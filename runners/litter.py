"""What a finished candidate's user left in the machine's shared scratch folders. Behind the uid wall a candidate can
write only in its own folder and where every user may (``/dev/shm``, ``/tmp``, ``/var/tmp``): the judge kills its
processes at the end of its evaluation (runners/isolation.py ``kill_leftovers``) and then removes every file and
folder its user owns in those, so that nothing it wrote outlives it (a megabyte in ``/dev/shm`` did,
tests/test_judge_attacks_round2.py; tens of gigabytes there fill the tmpfs of the judge's exchange for every later
evaluation). Only folders writable by every user are walked into: elsewhere the candidate's user could not have
written, and the judge's own folders (the workers' among them) are not touched."""
from __future__ import annotations

import os
import shutil
import stat
import tempfile

SHARED = ("/dev/shm", "/tmp", "/var/tmp")
MAX_DEPTH = 8  # world-writable folders inside world-writable folders, as deep as that


def sweep(uid: int | None) -> list[str]:
    """Remove what ``uid`` owns in the shared scratch folders (after its processes are gone); returns the paths
    removed. Nothing where ``uid`` is None (the judge's own user: its files cannot be told apart)."""
    if uid is None or uid == os.geteuid():
        return []
    removed: list[str] = []
    seen: set[str] = set()
    for root in (*SHARED, tempfile.gettempdir()):
        real = os.path.realpath(root)
        if real not in seen and os.path.isdir(real):
            seen.add(real)
            _sweep(real, uid, removed, 0)
    return removed


def _sweep(folder: str, uid: int, removed: list[str], depth: int) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == uid:
            try:
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                pass
        elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH and depth < MAX_DEPTH:
            _sweep(entry.path, uid, removed, depth + 1)
