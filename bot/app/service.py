"""Assembles the service: the job store, GitHub, git, the inbox, the dispatch, the scheduler and the routes."""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import logging
import sys

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from bot.github.auth import AppAuthority, AppCredentials
from bot.github.client import GitHubClient
from bot.github.git_remote import GitRemote
from bot.jobs.dispatch import make_dispatch
from bot.jobs.store import JobStore

from . import dashboard, webhooks
from .context import AppContext
from .events import EventProcessor
from .job_hooks import AppJobHooks
from .scheduler import Scanner
from .settings import Settings

log = logging.getLogger("kernelsmith.service")


def build_context(settings: Settings) -> AppContext:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = JobStore(settings.db_url)
    authority = AppAuthority(AppCredentials(settings.app_id, settings.private_key), settings.github_api_url,
                             throttle=settings.github_throttle)
    github = GitHubClient(authority, throttle=settings.github_throttle)
    git = GitRemote(settings.git_url, settings.data_dir / "tools")
    return AppContext(settings=settings, store=store, github=github, git=git)


def create_app(settings: Settings, workers: bool = True) -> FastAPI:
    ctx = build_context(settings)
    hooks = AppJobHooks(ctx)
    dispatch = make_dispatch(settings.dispatch, store=ctx.store, hooks=hooks, pipeline=settings.pipeline,
                             slots=settings.gpus, per_repo=settings.per_repo_concurrency)
    events = EventProcessor(ctx)
    scanner = Scanner(ctx)
    ctx.wake_jobs, ctx.wake_events = dispatch.wake, events.wake

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        # The config parser imports torch (through runners): seconds of CPU that must not land while webhooks
        # are being acknowledged, so it is loaded before the service accepts connections.
        importlib.import_module("bot.config")
        recovered = ctx.store.recover(settings.max_attempts)
        for job in recovered:
            log.warning("job %d after restart: %s (%s)", job.id, job.state, job.reason)
        if workers:
            events.start()
            dispatch.start()
            scanner.start()
        try:
            yield
        finally:
            if workers:
                scanner.stop()
                events.stop()
                dispatch.stop()
            ctx.store.close()

    app = FastAPI(title="kernelsmith", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.ctx = ctx
    app.include_router(webhooks.router(ctx))
    app.include_router(dashboard.router(ctx))
    app.mount("/static", StaticFiles(directory=dashboard.STATIC), name="static")
    return app


def _not_dumpable() -> None:
    """The secrets were removed from os.environ, but /proc/<pid>/environ still shows the environment the
    process started with. A non-dumpable process's /proc files belong to root, so a job's worker or a
    repository's test running as the same (non-root) user cannot read them."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(4, 0)  # PR_SET_DUMPABLE, 0
    except OSError:
        log.warning("could not make the service non-dumpable; run workers as another user")


def serve(settings: Settings, host: str, port: int) -> None:
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # The inbox, the dispatch and the scheduler are threads of this process: a shorter GIL switch interval
    # keeps webhook acknowledgements prompt while they work.
    sys.setswitchinterval(0.001)
    _not_dumpable()
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info", access_log=False)
