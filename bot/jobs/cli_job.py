"""`kernelsmith optimize` as a job of the App's job store, run here: the CLI is the App's job run locally.

The record is kept in ``<out>/job.db`` (a SQLite file) once the run has prepared ``<out>``; a run refused in
preflight writes nothing anywhere, as before.
"""
from __future__ import annotations

import dataclasses
import sqlite3
import tempfile
from pathlib import Path

from .runner import run_in_process
from .store import JobStore, sqlite_url


def run_as_job(opts, pipeline, progress):
    with tempfile.TemporaryDirectory(prefix="ks-job-") as tmp:
        db = Path(tmp) / "job.db"
        store = JobStore(sqlite_url(db))
        options = {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(opts).items()
                   if k not in ("target", "out", "kernel", "backend")}
        job, _ = store.create_job(repo=str(opts.target), trigger="cli", kernel=opts.kernel, backend=opts.backend,
                                  options=options)
        try:
            return run_in_process(store, job.id, pipeline, opts, progress)
        finally:
            stages = [s[0] for s in store.get(job.id).stages]
            store.close()
            out = Path(opts.out)
            if "bundle" in stages and out.is_dir():
                src, dst = sqlite3.connect(db), sqlite3.connect(out / "job.db")
                with dst:
                    src.backup(dst)
                src.close()
                dst.close()
