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
from .states import State
from .store import JobStore, sqlite_url

JOB_FILE = "job.db"


def run_as_job(opts, pipeline, progress):
    with tempfile.TemporaryDirectory(prefix="ks-job-") as tmp:
        db = Path(tmp) / JOB_FILE
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
                src, dst = sqlite3.connect(db), sqlite3.connect(out / JOB_FILE)
                with dst:
                    src.backup(dst)
                src.close()
                dst.close()


def finished_job(out: Path):
    """The job recorded in ``<out>/job.db`` when it ended with a verdict (done or no_gain: its report is written),
    else None: a run killed mid-way has no record, and one that failed or was cancelled is not finished."""
    db = Path(out) / JOB_FILE
    if not db.is_file() or not (Path(out) / "report.json").is_file():
        return None
    store = JobStore(sqlite_url(db))
    try:
        jobs = store.jobs(limit=1)
    finally:
        store.close()
    job = jobs[0] if jobs else None
    if job is None or job.state not in (State.done.value, State.no_gain.value) or not job.verdict:
        return None
    return job
