"""The job store: jobs, deliveries, publications and repositories in any SQLAlchemy database (SQLite by default).

Every state change goes through `transition`, which refuses a move that `states.TRANSITIONS` does not allow.
"""
from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

from sqlalchemy import create_engine, delete, event, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from .models import Base, CommentClaim, Delivery, Job, Publication, Repository, now
from .states import ACTIVE, FINAL, RUNNING, STAGE_STATE, State, check_transition


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{Path(path).resolve()}"


class JobStore:
    def __init__(self, url: str):
        self.url = url
        kwargs = {"connect_args": {"check_same_thread": False, "timeout": 30}} if url.startswith("sqlite") else {}
        self.engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        Base.metadata.create_all(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._lock = threading.RLock()  # one writer at a time inside this process (SQLite allows one anyway)

    def close(self) -> None:
        self.engine.dispose()

    def session(self) -> Session:
        return self._session()

    # --- jobs -----------------------------------------------------------------------------------------------
    def create_job(self, **fields) -> tuple[Job, bool]:
        """A new queued job; with a `source_key` already used, the existing job and False."""
        with self._lock, self.session() as s:
            job = Job(state=State.queued.value, stages=[], **fields)
            s.add(job)
            try:
                s.commit()
                return job, True
            except IntegrityError:
                s.rollback()
                existing = s.scalars(select(Job).where(Job.source_key == fields.get("source_key"))).one()
                return existing, False

    def get(self, job_id: int) -> Job | None:
        with self.session() as s:
            return s.get(Job, job_id)

    def jobs(self, repo: str | None = None, limit: int = 200) -> list[Job]:
        with self.session() as s:
            q = select(Job).order_by(Job.id.desc()).limit(limit)
            if repo:
                q = q.where(Job.repo == repo)
            return list(s.scalars(q))

    def active_jobs(self, repo: str, issue_number: int | None = None) -> list[Job]:
        states = [State.queued.value] + [st.value for st in ACTIVE]
        with self.session() as s:
            q = select(Job).where(Job.repo == repo, Job.state.in_(states)).order_by(Job.id)
            if issue_number is not None:
                q = q.where(Job.issue_number == issue_number)
            return list(s.scalars(q))

    def jobs_created_since(self, repo: str, since: dt.datetime) -> int:
        with self.session() as s:
            return s.scalar(select(func.count(Job.id)).where(Job.repo == repo, Job.created_at >= since)) or 0

    def update(self, job_id: int, **fields) -> Job:
        with self._lock, self.session() as s:
            job = s.get(Job, job_id)
            for k, v in fields.items():
                setattr(job, k, v)
            s.commit()
            return job

    def transition(self, job_id: int, new: State, **fields) -> Job:
        with self._lock, self.session() as s:
            job = s.get(Job, job_id)
            check_transition(job.state, new)
            job.state = State(new).value
            if new in FINAL:
                job.finished_at = now()
            for k, v in fields.items():
                setattr(job, k, v)
            s.commit()
            return job

    def enter_stage(self, job_id: int, stage: str) -> Job:
        """Record a named stage on the job and move it to the state that stage belongs to."""
        with self._lock, self.session() as s:
            job = s.get(Job, job_id)
            if job.state in {st.value for st in FINAL}:
                return job
            new = STAGE_STATE.get(stage)
            if new is not None and new.value != job.state:
                check_transition(job.state, new)
                job.state = new.value
            job.stage = stage
            job.stages = [*job.stages, [stage, now().isoformat(timespec="seconds")]]
            s.commit()
            return job

    def claim_next(self, per_repo: int, skip_repos: set[str] = frozenset()) -> Job | None:
        """The oldest queued job whose repository has fewer than `per_repo` jobs running; it becomes `preparing`."""
        with self._lock, self.session() as s:
            running = dict(s.execute(select(Job.repo, func.count(Job.id))
                                     .where(Job.state.in_([st.value for st in ACTIVE])).group_by(Job.repo)).all())
            t = now()
            for job in s.scalars(select(Job).where(Job.state == State.queued.value).order_by(Job.id)):
                if job.repo in skip_repos or running.get(job.repo, 0) >= per_repo:
                    continue
                if job.next_attempt_at and job.next_attempt_at > t:
                    continue
                if job.cancel_requested:
                    job.state, job.finished_at, job.reason = State.cancelled.value, t, "cancelled before it started"
                    continue
                job.state, job.attempts, job.started_at = State.preparing.value, job.attempts + 1, t
                s.commit()
                return job
            s.commit()
            return None

    def publishing_due(self) -> list[Job]:
        """Jobs whose publishing waits for a retry (GitHub rate limit) or was cut short by a restart."""
        with self.session() as s:
            t = now()
            q = select(Job).where(Job.state == State.publishing.value)
            return [j for j in s.scalars(q) if not j.next_attempt_at or j.next_attempt_at <= t]

    def request_cancel(self, job_ids: list[int]) -> list[Job]:
        with self._lock, self.session() as s:
            changed = []
            for job in s.scalars(select(Job).where(Job.id.in_(job_ids))):
                if job.state == State.queued.value:
                    job.state, job.finished_at, job.reason = State.cancelled.value, now(), "cancelled before it started"
                elif job.state in {st.value for st in RUNNING}:
                    job.cancel_requested = True
                else:
                    continue
                changed.append(job)
            s.commit()
            return changed

    def recover(self, max_attempts: int) -> list[Job]:
        """After a restart: a job cut short while running is queued again (resumed from the start of its
        pipeline) until it has had `max_attempts` tries, then it fails with the reason. Publishing is
        picked up again by `publishing_due`. Returns the jobs changed."""
        changed = []
        with self._lock, self.session() as s:
            for job in s.scalars(select(Job).where(Job.state.in_([st.value for st in RUNNING]))):
                stage = job.stage or job.state
                if job.cancel_requested:
                    job.state, job.finished_at = State.cancelled.value, now()
                    job.reason = f"cancelled (the service restarted during {stage})"
                elif job.attempts < max_attempts:
                    job.state = State.queued.value
                    job.reason = f"resumed: the service restarted during stage {stage} (attempt {job.attempts})"
                else:
                    job.state, job.finished_at = State.failed.value, now()
                    job.reason = (f"the service restarted during stage {stage}, and the job had already had "
                                  f"{job.attempts} attempts")
                changed.append(job)
            s.commit()
        return changed

    # --- webhook deliveries ---------------------------------------------------------------------------------
    def add_delivery(self, delivery_id: str, event: str, action: str | None, payload: str,
                     state: str = "pending", outcome: str | None = None) -> bool:
        """Store a delivery; False when that delivery id was seen before (a replay)."""
        row = {"id": delivery_id, "event": event, "action": action, "payload": payload, "state": state,
               "outcome": outcome, "attempts": 0, "received_at": now()}
        try:
            with self._lock, self.engine.begin() as conn:  # one INSERT, no ORM session: this is on the ack path
                conn.execute(insert(Delivery), row)
            return True
        except IntegrityError:
            return False

    def delivery(self, delivery_id: str) -> Delivery | None:
        with self.session() as s:
            return s.get(Delivery, delivery_id)

    def next_delivery(self) -> Delivery | None:
        with self.session() as s:
            due = or_(Delivery.next_attempt_at.is_(None), Delivery.next_attempt_at <= now())
            q = (select(Delivery).where(Delivery.state == "pending", due)
                 .order_by(Delivery.received_at, Delivery.id).limit(1))
            return s.scalars(q).first()

    def finish_delivery(self, delivery_id: str, state: str, outcome: str, retry_at: dt.datetime | None = None):
        stmt = (update(Delivery).where(Delivery.id == delivery_id)
                .values(state=state, outcome=outcome, attempts=Delivery.attempts + 1, next_attempt_at=retry_at))
        with self._lock, self.engine.begin() as conn:
            conn.execute(stmt)

    def pending_deliveries(self) -> int:
        with self.session() as s:
            return s.scalar(select(func.count(Delivery.id)).where(Delivery.state == "pending")) or 0

    def claim_comment(self, comment_id: int, delivery_id: str) -> str | None:
        """Record that ``delivery_id`` acts on the comment; the other delivery's id when one already does
        (None: this delivery holds the claim, also when it is tried again)."""
        try:
            with self._lock, self.engine.begin() as conn:
                conn.execute(insert(CommentClaim), {"comment_id": comment_id, "delivery_id": delivery_id,
                                                    "claimed_at": now()})
            return None
        except IntegrityError:
            with self.session() as s:
                holder = s.get(CommentClaim, comment_id).delivery_id
            return None if holder == delivery_id else holder

    # --- publications and repositories ------------------------------------------------------------------------
    def publication(self, repo: str, branch: str) -> Publication | None:
        with self.session() as s:
            return s.get(Publication, (repo, branch))

    def record_publication(self, repo: str, branch: str, sha: str, pr_number: int | None) -> None:
        with self._lock, self.session() as s:
            pub = s.get(Publication, (repo, branch)) or Publication(repo=repo, branch=branch, pushed_sha=sha)
            pub.pushed_sha, pub.pr_number = sha, pr_number
            s.merge(pub)
            s.commit()

    def upsert_repository(self, full_name: str, installation_id: int | None, active: bool = True) -> None:
        with self._lock, self.session() as s:
            repo = s.get(Repository, full_name) or Repository(full_name=full_name)
            repo.installation_id = installation_id or repo.installation_id
            repo.active = active
            s.merge(repo)
            s.commit()

    def repository(self, full_name: str) -> Repository | None:
        with self.session() as s:
            return s.get(Repository, full_name)

    def set_installation_active(self, installation_id: int, active: bool) -> list[str]:
        """Every stored repository of the installation made active or inactive; their names."""
        with self._lock, self.session() as s:
            repos = list(s.scalars(select(Repository).where(Repository.installation_id == installation_id)))
            for repo in repos:
                repo.active = active
            s.commit()
            return [r.full_name for r in repos]

    def rename_repository(self, old: str, new: str) -> int:
        """A repository renamed or transferred on GitHub: its record, its publications and its jobs take the new
        name (a record already under the new name wins). Returns how many jobs were moved."""
        with self._lock, self.session() as s:
            if s.get(Repository, new) is None:
                s.execute(update(Repository).where(Repository.full_name == old).values(full_name=new))
            else:
                s.execute(delete(Repository).where(Repository.full_name == old))
            taken = list(s.scalars(select(Publication.branch).where(Publication.repo == new)))
            s.execute(update(Publication).where(Publication.repo == old, Publication.branch.not_in(taken))
                      .values(repo=new))
            moved = s.execute(update(Job).where(Job.repo == old).values(repo=new)).rowcount
            s.commit()
            return moved

    def jobs_with_pull(self, repo: str, number: int) -> list[Job]:
        with self.session() as s:
            return list(s.scalars(select(Job).where(Job.repo == repo, Job.pr_number == number).order_by(Job.id)))

    def repositories(self) -> list[Repository]:
        with self.session() as s:
            return list(s.scalars(select(Repository).where(Repository.active.is_(True))))

    def record_scan(self, full_name: str, sha: str | None, outcome: str, at: dt.datetime | None = None) -> None:
        with self._lock, self.session() as s:
            repo = s.get(Repository, full_name)
            if sha:
                repo.last_scan_sha = sha
            repo.last_scan_at, repo.last_scan_outcome = at or now(), outcome
            s.commit()


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()
