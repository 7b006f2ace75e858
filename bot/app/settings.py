"""The service's settings, from environment variables. Only three are required: the webhook secret, the App's
id and its private key. Secrets are removed from the process environment once read, so that no child process
(git, a job's worker, a repository's test) inherits them."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import UserError
from bot.jobs.runner import DEFAULT_PIPELINE
from bot.jobs.store import sqlite_url

SECRET_VARS = ("KS_WEBHOOK_SECRET", "KS_PRIVATE_KEY", "KS_PRIVATE_KEY_PATH")


@dataclass
class Settings:
    webhook_secret: bytes = field(repr=False)
    app_id: int
    private_key: str = field(repr=False)
    data_dir: Path = Path("kernelsmith-data")
    database_url: str = ""  # empty: a SQLite file in data_dir
    github_api_url: str = "https://api.github.com"
    git_url: str = "https://github.com/{repo}.git"
    dispatch: str = "local"
    pipeline: str = DEFAULT_PIPELINE
    gpus: list[int | None] = field(default_factory=lambda: [None])
    default_backend: str = "interpret"
    max_body: int = 5 * 1024 * 1024
    per_repo_concurrency: int = 1
    jobs_per_hour: int = 10
    max_budget: int = 200
    default_budget: int = 24
    max_attempts: int = 2
    status_interval: float = 5.0  # seconds between two edits of a status comment (state changes always edit)
    scan_tick: float = 60.0
    github_throttle: bool = True  # PyGithub's pause between requests (off in tests against the loopback stand-in)
    public_url: str = ""  # where the job pages are served, for links in comments

    def __repr__(self) -> str:
        return f"Settings(app_id={self.app_id}, data_dir={self.data_dir}, dispatch={self.dispatch})"

    @property
    def db_url(self) -> str:
        return self.database_url or sqlite_url(self.data_dir / "kernelsmith.db")


def _gpus(spec: str) -> tuple[list[int | None], str]:
    if spec == "auto":
        spec = "none"
        if shutil.which("nvidia-smi"):
            import subprocess

            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
            n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
            spec = ",".join(map(str, range(n))) if n else "none"
    if spec in ("none", ""):
        return [None], "interpret"
    return [int(g) for g in spec.split(",")], "nvidia"


def from_env(env: dict[str, str] | None = None, scrub: bool = True) -> Settings:
    env = dict(os.environ if env is None else env)
    missing = [v for v in ("KS_WEBHOOK_SECRET", "KS_APP_ID") if not env.get(v)]
    if not env.get("KS_PRIVATE_KEY") and not env.get("KS_PRIVATE_KEY_PATH"):
        missing.append("KS_PRIVATE_KEY (or KS_PRIVATE_KEY_PATH)")
    if missing:
        raise UserError(f"kernelsmith serve needs {', '.join(missing)}",
                        "Set the webhook secret, the App's id and its private key (PEM) from the App's settings "
                        "page; docs/deploy.md shows how.")
    key = env.get("KS_PRIVATE_KEY") or Path(env["KS_PRIVATE_KEY_PATH"]).read_text()
    if "PRIVATE KEY" not in key:
        raise UserError("KS_PRIVATE_KEY does not hold a PEM private key",
                        "Use the .pem file GitHub generated for the App (the whole file, with its BEGIN/END lines).")
    gpus, backend = _gpus(env.get("KS_GPUS", "auto"))
    s = Settings(
        webhook_secret=env["KS_WEBHOOK_SECRET"].encode(), app_id=int(env["KS_APP_ID"]), private_key=key,
        data_dir=Path(env.get("KS_DATA_DIR", "kernelsmith-data")), database_url=env.get("KS_DATABASE_URL", ""),
        github_api_url=env.get("KS_GITHUB_API_URL", Settings.github_api_url),
        git_url=env.get("KS_GIT_URL", Settings.git_url), dispatch=env.get("KS_DISPATCH", "local"),
        pipeline=env.get("KS_PIPELINE", Settings.pipeline), gpus=gpus,
        default_backend=env.get("KS_DEFAULT_BACKEND", backend),
        max_body=int(env.get("KS_MAX_BODY", Settings.max_body)),
        per_repo_concurrency=int(env.get("KS_PER_REPO_CONCURRENCY", Settings.per_repo_concurrency)),
        jobs_per_hour=int(env.get("KS_JOBS_PER_HOUR", Settings.jobs_per_hour)),
        max_budget=int(env.get("KS_MAX_BUDGET", Settings.max_budget)),
        default_budget=int(env.get("KS_DEFAULT_BUDGET", Settings.default_budget)),
        max_attempts=int(env.get("KS_MAX_ATTEMPTS", Settings.max_attempts)),
        status_interval=float(env.get("KS_STATUS_INTERVAL", Settings.status_interval)),
        scan_tick=float(env.get("KS_SCAN_TICK", Settings.scan_tick)),
        github_throttle=env.get("KS_GITHUB_THROTTLE", "1") != "0", public_url=env.get("KS_PUBLIC_URL", ""))
    if scrub:
        for var in SECRET_VARS:
            os.environ.pop(var, None)
    return s
