"""What every part of the service shares: settings, the job store, GitHub, git, and a way to wake the workers."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.github.client import GitHubClient
from bot.github.git_remote import GitRemote
from bot.jobs.store import JobStore

from .settings import Settings


@dataclass
class AppContext:
    settings: Settings
    store: JobStore
    github: GitHubClient
    git: GitRemote
    wake_jobs: Callable[[], None] = lambda: None
    wake_events: Callable[[], None] = lambda: None

    def job_url(self, job_id: int) -> str:
        base = self.settings.public_url.rstrip("/")
        return f"{base}/jobs/{job_id}" if base else ""
