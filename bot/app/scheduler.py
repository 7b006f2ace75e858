"""Scheduled scans: for each repository the App is installed on, at the interval its config's `schedule:`
names, kernels whose module, local helpers or test changed since the last scan get a job, within the limits
(open-PR limit, jobs per hour)."""
from __future__ import annotations

import datetime as dt
import logging
import shlex
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from bot.errors import UserError
from bot.github.git_remote import changed_files
from bot.jobs.models import Repository, now
from runners.extract import ExtractionError, local_imports

from .context import AppContext
from .publish import BRANCH_PREFIX

if TYPE_CHECKING:
    from bot.config import Config, KernelConfig

log = logging.getLogger("kernelsmith.scheduler")
INTERVALS = {"hourly": dt.timedelta(hours=1), "daily": dt.timedelta(days=1), "weekly": dt.timedelta(weeks=1)}


def kernel_files(root: Path, kernel: KernelConfig) -> set[str]:
    """The files whose change calls for a new search: the module, its local helpers and its test files."""
    try:
        files = set(local_imports(root, kernel.path, kernel.entry))
    except (ExtractionError, OSError, SyntaxError):
        files = {kernel.path}
    try:
        words = shlex.split(kernel.test)
    except ValueError:
        words = []
    files |= {w.split("::")[0] for w in words if (root / w.split("::")[0]).exists()}
    return files


def due(repo: Repository, config: Config, at: dt.datetime) -> bool:
    if not config.schedule:
        return False
    interval = INTERVALS[config.schedule["interval"]]
    return repo.last_scan_at is None or at - repo.last_scan_at >= interval


class Scanner:
    def __init__(self, ctx: AppContext):
        self.ctx = ctx
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ks-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.ctx.settings.scan_tick):
            try:
                self.scan_all()
            except Exception:
                log.exception("scheduled scan failed")

    def scan_all(self, at: dt.datetime | None = None) -> dict[str, str]:
        outcomes = {}
        for repo in self.ctx.store.repositories():
            try:
                outcomes[repo.full_name] = self.scan(repo, at or now())
            except Exception as exc:  # noqa: BLE001 (one repository's trouble never stops the others)
                log.warning("scan of %s: %s", repo.full_name, exc)
                outcomes[repo.full_name] = f"error: {exc}"
                self.ctx.store.record_scan(repo.full_name, None, outcomes[repo.full_name])
        return outcomes

    def scan(self, repo: Repository, at: dt.datetime) -> str:
        from bot.config import CONFIG_PATH, parse_config

        ctx = self.ctx
        token = ctx.github.token_for(repo.full_name, repo.installation_id)
        base, head = ctx.git.head_branch(repo.full_name, token)
        mirror = ctx.settings.data_dir / "mirrors" / repo.full_name.replace("/", "+")
        if (mirror / ".git").exists():
            ctx.git.fetch(repo.full_name, token, mirror)
        ctx.git.clone(repo.full_name, token, mirror, head)
        path = mirror / CONFIG_PATH
        if not path.is_file():
            return "no config"
        try:
            config = parse_config(path.read_text(), CONFIG_PATH)
        except UserError as exc:
            return f"invalid config: {exc}"
        if not due(repo, config, at):
            return "not due"
        if head == repo.last_scan_sha:
            ctx.store.record_scan(repo.full_name, head, "no change since the last scan", at)
            return "no change"
        changed = changed_files(mirror, repo.last_scan_sha, head) if repo.last_scan_sha else None
        wanted = [name for name, k in config.kernels.items() if changed is None or kernel_files(mirror, k) & changed]
        started, skipped = self._start(repo, config, base, head, wanted)
        outcome = f"scan of {head[:7]}: changed {wanted or 'none'}; started {started}" + \
                  (f"; held back by limits: {skipped}" if skipped else "")
        ctx.store.record_scan(repo.full_name, head, outcome, at)
        return outcome

    def _start(self, repo: Repository, config: Config, base: str, head: str, kernels: list[str]):
        ctx, s = self.ctx, self.ctx.settings
        gh = ctx.github.repo(repo.full_name, repo.installation_id)
        open_ks = len(gh.open_pulls(head_prefix=BRANCH_PREFIX)) if kernels else 0
        room = min(config.open_pull_requests_limit - open_ks,
                   s.jobs_per_hour - ctx.store.jobs_created_since(repo.full_name, now() - dt.timedelta(hours=1)))
        started, skipped = [], []
        for kernel in kernels:
            if len(started) >= max(room, 0):
                skipped.append(kernel)
                continue
            job, _ = ctx.store.create_job(
                source_key=f"scan:{repo.full_name}:{head}:{kernel}", repo=repo.full_name,
                installation_id=repo.installation_id, trigger="schedule", kernel=kernel, backend=s.default_backend,
                options={"budget": s.default_budget, "base_branch": base}, commit=head, requested_by="schedule")
            started.append(job.id)
        if started:
            ctx.wake_jobs()
        return started, skipped
