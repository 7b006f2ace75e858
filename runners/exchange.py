"""The judge's folder of input files and the emptying of a folder a worker may have written (runners/judge.py)."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .wire import encode_value


@dataclass
class Exchange:
    """The judge's folder of input files; workers read it, and each writes outputs to its own outbox."""

    root: Path
    counter: int = 0

    def write_inputs(self, kwargs: dict) -> dict:
        self.counter += 1
        metas = {}
        for name, value in kwargs.items():
            metas[name] = encode_value(self.root, f"in{self.counter}-{name}", value, storage=True)
        return metas

    def clear(self) -> None:
        clear_folder(self.root)


def clear_folder(folder: Path) -> None:
    """Empty a folder a worker may have written: files, and whatever else was left there (folders, FIFOs,
    links), so that nothing planted jams a later evaluation. Everything goes through a descriptor of the folder
    opened without following a link: a worker that swapped its outbox for a link to another folder made the
    judge empty that folder instead (tests/test_judge_attacks_round3.py). Such a link is removed, never entered."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow)
    except OSError:
        if os.path.islink(folder):
            os.unlink(folder)  # a link planted in place of the folder: gone, and nothing it pointed at touched
            os.mkdir(folder, 0o755)
        return
    try:
        for entry in os.scandir(fd):
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.name, dir_fd=fd, ignore_errors=True)
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                pass
    finally:
        os.close(fd)
