"""The job store on a real SQLite file: explicit transitions, per-repository concurrency, cancellation,
recovery after a restart, idempotent creation, delivery de-duplication; and the CLI's job record."""
import datetime as dt

import pytest

from bot.errors import UserError
from bot.jobs.cli_job import run_as_job
from bot.jobs.states import State, TransitionError
from bot.jobs.store import JobStore, sqlite_url
from bot.optimize import NoProgress, OptimizeOptions

from .pipelines import OptimizeResult as TinyResult
from .pipelines import tiny


@pytest.fixture
def store(tmp_path):
    s = JobStore(sqlite_url(tmp_path / "jobs.db"))
    yield s
    s.close()


def new(store, repo="o/r", kernel="k", **kw):
    return store.create_job(repo=repo, trigger="comment", kernel=kernel, backend="interpret", **kw)[0]


def test_transitions_are_explicit(store):
    job = new(store)
    with pytest.raises(TransitionError):
        store.transition(job.id, State.done)  # queued -> done skips the work
    store.transition(job.id, State.preparing)
    store.enter_stage(job.id, "search")
    assert store.get(job.id).state == "evolving"
    store.enter_stage(job.id, "verify")
    store.transition(job.id, State.no_gain)
    with pytest.raises(TransitionError):
        store.transition(job.id, State.evolving)  # final states are final
    assert [s[0] for s in store.get(job.id).stages] == ["search", "verify"]


def test_per_repository_concurrency_and_cancel(store):
    a1, a2, b1 = new(store, "o/a"), new(store, "o/a"), new(store, "o/b")
    assert store.claim_next(per_repo=1).id == a1.id
    assert store.claim_next(per_repo=1).id == b1.id  # a2 waits for a1: one job per repository at a time
    assert store.claim_next(per_repo=1) is None
    store.request_cancel([a1.id, a2.id])
    assert store.get(a2.id).state == "cancelled"  # queued: cancelled at once
    assert store.get(a1.id).cancel_requested and store.get(a1.id).state == "preparing"  # running: asked to stop


def test_recover_after_a_restart(store):
    j1, j2, j3 = new(store), new(store, "o/x"), new(store, "o/y")
    for j in (j1, j2):
        store.claim_next(per_repo=1)
        store.enter_stage(j.id, "search")
    store.update(j2.id, attempts=2)
    changed = {j.id: j for j in store.recover(max_attempts=2)}
    assert changed[j1.id].state == "queued" and "restarted during stage search" in changed[j1.id].reason
    assert changed[j2.id].state == "failed" and "already had 2 attempts" in changed[j2.id].reason
    assert store.get(j3.id).state == "queued" and j3.id not in changed


def test_idempotent_creation_and_delivery_dedup(store):
    a, created = store.create_job(repo="o/r", trigger="comment", kernel="k", backend="interpret", source_key="c:1:k")
    b, again = store.create_job(repo="o/r", trigger="comment", kernel="k", backend="interpret", source_key="c:1:k")
    assert created and not again and a.id == b.id
    assert store.add_delivery("d-1", "ping", None, "{}") is True
    assert store.add_delivery("d-1", "ping", None, "{}") is False
    store.finish_delivery("d-1", "pending", "rate limited", retry_at=dt.datetime(2999, 1, 1))
    assert store.next_delivery() is None  # waits for its retry time
    assert store.jobs_created_since("o/r", dt.datetime(2000, 1, 1)) == 1


def test_the_cli_run_is_a_job(example_repo, tmp_path):
    out = tmp_path / "run"
    opts = OptimizeOptions(target=example_repo, kernel="rms_norm", out=out, budget=3, backend="interpret")
    result = run_as_job(opts, tiny, NoProgress())
    assert result.verdict == "improved"
    store = JobStore(sqlite_url(out / "job.db"))
    try:
        [job] = store.jobs()
        assert job.trigger == "cli" and job.state == "done" and job.done_count == 3 and job.best == 1.04
        assert [s[0] for s in job.stages] == ["preflight", "bundle", "baseline", "search", "verify", "report"]
        assert job.options["budget"] == 3
    finally:
        store.close()

    with pytest.raises(UserError):  # refused in preflight: nothing is written anywhere
        run_as_job(OptimizeOptions(target=example_repo, kernel="nope", out=tmp_path / "x"), tiny, NoProgress())
    assert not (tmp_path / "x").exists()


def test_the_tiny_pipelines_return_what_optimize_returns():
    import dataclasses

    from bot.optimize import OptimizeResult

    def shape(cls):
        return [(f.name, str(f.type), f.default) for f in dataclasses.fields(cls)]

    assert shape(TinyResult) == shape(OptimizeResult)


class Hooks:
    """The App's side of a job, reduced to what the dispatch needs: a checkout (the example repository) that
    GitHub's rate limit holds back once, and a record of what the dispatch reported."""

    def __init__(self, target, out):
        self.target, self.out, self.refused, self.seen = target, out, False, []

    def prepare(self, job):
        from bot.jobs.dispatch import Prepared, RetryLater

        if not self.refused:
            self.refused = True
            raise RetryLater("GitHub rate limit", dt.datetime(2000, 1, 1))
        return Prepared(target=self.target, out=self.out, backend="interpret")

    def progress(self, job):
        self.seen.append((job.state, job.done_count))

    def publish(self, job):
        self.seen.append(("publish", job.id))
        from bot.jobs.states import State

        self.store.transition(job.id, State.done)

    def finished(self, job):
        self.seen.append(("finished", job.state))


def test_local_dispatch_requeues_when_github_holds_it_back(store, example_repo, tmp_path, monkeypatch):
    from conftest import ROOT

    from bot.jobs.dispatch import LocalDispatch

    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{ROOT / 'tests'}")  # where the worker finds app.pipelines
    hooks = Hooks(example_repo, tmp_path / "job" / "out")
    hooks.store = store
    dispatch = LocalDispatch(store, hooks, "app.pipelines:tiny", slots=[None])
    job = new(store, kernel="rms_norm", options={"budget": 2})
    dispatch.run(store.claim_next(per_repo=1), None)
    held = store.get(job.id)
    assert held.state == "queued" and held.reason == "waiting: GitHub rate limit" and held.attempts == 0
    dispatch.run(store.claim_next(per_repo=1), None)  # the retry time has passed
    done = store.get(job.id)
    assert done.state == "done" and done.verdict == "improved" and done.done_count == 2
    assert ("publish", job.id) in hooks.seen and ("finished", "done") in hooks.seen
    assert ("evolving", 2) in hooks.seen  # progress reached the hooks from the worker process
