"""The tables of the job store: jobs, webhook deliveries (the durable inbox), comment claims, publications, scans,
repositories."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("source_key", name="uq_job_source"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source_key: Mapped[str | None] = mapped_column(String(200))  # delivery+kernel: a retried event makes no twin
    repo: Mapped[str] = mapped_column(String(200), index=True)  # owner/name, or a local path for the CLI
    installation_id: Mapped[int | None] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(20))  # comment | schedule | cli
    kernel: Mapped[str] = mapped_column(String(200))
    backend: Mapped[str] = mapped_column(String(20))  # the name the user gave: nvidia | metax | interpret | auto
    options: Mapped[dict] = mapped_column(JSON, default=dict)  # budget, seed, min_speedup, ...
    commit: Mapped[str | None] = mapped_column(String(40))
    issue_number: Mapped[int | None] = mapped_column(Integer)
    comment_id: Mapped[int | None] = mapped_column(BigInteger)  # GitHub's comment ids are past 2**31
    comment_url: Mapped[str | None] = mapped_column(String(500))
    status_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    requested_by: Mapped[str | None] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    stage: Mapped[str | None] = mapped_column(String(20))
    stages: Mapped[list] = mapped_column(JSON, default=list)  # [[name, iso time], ...] in the order reached
    done_count: Mapped[int] = mapped_column(Integer, default=0)
    total_count: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    best: Mapped[float | None] = mapped_column(Float)
    verdict: Mapped[str | None] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text)
    out_dir: Mapped[str | None] = mapped_column(String(500))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    pr_number: Mapped[int | None] = mapped_column(Integer)
    pr_url: Mapped[str | None] = mapped_column(String(500))
    github_error: Mapped[str | None] = mapped_column(Text)  # the last GitHub refusal met while reporting
    next_attempt_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=now)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=now, onupdate=now)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime)


class Delivery(Base):
    """One webhook delivery, stored before it is acknowledged: the primary key is GitHub's delivery id."""

    __tablename__ = "deliveries"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    event: Mapped[str] = mapped_column(String(50))
    action: Mapped[str | None] = mapped_column(String(50))
    payload: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(20), default="pending", index=True)  # pending|done|ignored|failed
    outcome: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    received_at: Mapped[dt.datetime] = mapped_column(DateTime, default=now)


class CommentClaim(Base):
    """The delivery that acts on a comment's command: any other delivery of the same comment (a body replayed
    under a new delivery id) is ignored, so a command is answered once."""

    __tablename__ = "comment_claims"

    comment_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    delivery_id: Mapped[str] = mapped_column(String(100))
    claimed_at: Mapped[dt.datetime] = mapped_column(DateTime, default=now)


class Publication(Base):
    """What kernelsmith last pushed to one of its branches: a different tip means a human pushed."""

    __tablename__ = "publications"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    branch: Mapped[str] = mapped_column(String(200), primary_key=True)
    pushed_sha: Mapped[str] = mapped_column(String(40))
    pr_number: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=now, onupdate=now)


class Repository(Base):
    """A repository the App is installed on (from installation events, or first seen in a command)."""

    __tablename__ = "repositories"

    full_name: Mapped[str] = mapped_column(String(200), primary_key=True)
    installation_id: Mapped[int | None] = mapped_column(Integer)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    last_scan_sha: Mapped[str | None] = mapped_column(String(40))
    last_scan_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    last_scan_outcome: Mapped[str | None] = mapped_column(Text)
