"""The run store: every prompt, response, candidate and evaluation, written to the run's SQLite file as it
happens (SQLAlchemy Core, so the service can point it at PostgreSQL later).

Each write is its own committed transaction, and the search's random state, the bandit's counts and the
budget counters are saved with every candidate, so a ``kill -9`` loses at most the evaluations in flight;
candidates proposed but not yet evaluated are stored as ``pending`` and evaluated again on resume.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    select,
    update,
)

from runners.results import Evaluation

from .candidate import Candidate
from .providers.base import Completion

STORE_FILE = "run.sqlite"
meta = MetaData()
kv = Table("meta", meta, Column("key", String(64), primary_key=True), Column("value", Text))
candidates = Table(
    "candidates", meta,
    Column("id", Integer, primary_key=True, autoincrement=False), Column("parent_id", Integer),
    Column("operator", String(32)), Column("island", Integer), Column("generation", Integer),
    Column("source", Text), Column("sha256", String(64)), Column("genome", Text), Column("inspirations", Text),
    Column("status", String(16)),  # pending | evaluated | rejected | duplicate
    Column("rejected", Text), Column("evaluation", Text), Column("fitness", Float), Column("correct", Boolean),
    Column("model", String(128)), Column("created", Float), Column("evaluated_at", Float))
calls = Table(
    "llm_calls", meta,
    Column("id", Integer, primary_key=True, autoincrement=True), Column("candidate_id", Integer),
    Column("attempt", Integer), Column("model", String(128)), Column("kind", String(16)),
    Column("system", Text), Column("static", Text), Column("dynamic", Text), Column("response", Text),
    Column("error", Text), Column("input_tokens", Integer), Column("output_tokens", Integer),
    Column("cache_read_tokens", Integer), Column("cache_write_tokens", Integer), Column("cost", Float),
    Column("latency_s", Float), Column("attempts", Integer), Column("temperature", Float),
    Column("top_p", Float), Column("created", Float))


def _pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


class RunStore:
    def __init__(self, url_or_path: str | Path):
        url = str(url_or_path)
        if "://" not in url:
            url = f"sqlite:///{Path(url).resolve()}"
        self.engine = create_engine(url)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _pragmas)
        meta.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- meta -------------------------------------------------------------------------------------------------
    def put(self, key: str, value, conn=None) -> None:
        text = json.dumps(value, default=str)
        def write(c):
            if c.execute(select(kv.c.key).where(kv.c.key == key)).first():
                c.execute(update(kv).where(kv.c.key == key).values(value=text))
            else:
                c.execute(insert(kv).values(key=key, value=text))
        if conn is not None:
            write(conn)
        else:
            with self.engine.begin() as c:
                write(c)

    def get(self, key: str, default=None):
        with self.engine.connect() as c:
            row = c.execute(select(kv.c.value).where(kv.c.key == key)).first()
        return json.loads(row[0]) if row else default

    # -- candidates and calls ---------------------------------------------------------------------------------
    def add_candidate(self, cand: Candidate, status: str, state: dict | None = None) -> None:
        """A new proposal (pending, rejected or duplicate) with its LLM calls, and the search state after it."""
        with self.engine.begin() as c:
            c.execute(insert(candidates).values(
                id=cand.id, parent_id=cand.parent_id, operator=cand.operator, island=cand.island,
                generation=cand.generation, source=cand.source, sha256=cand.sha256 if cand.source else "",
                genome=json.dumps(cand.genome), inspirations=json.dumps(cand.inspirations), status=status,
                rejected=cand.rejected, model=cand.model, created=time.time(),
                evaluation=json.dumps(cand.evaluation.to_dict()) if cand.evaluation else None,
                fitness=cand.fitness, correct=cand.correct if cand.evaluation else None))
            for i, comp in enumerate(cand.calls):
                c.execute(insert(calls).values(candidate_id=cand.id, attempt=i, **_call_row(comp)))
            if state is not None:
                self.put("state", state, conn=c)

    def set_evaluation(self, cand: Candidate, state: dict | None = None) -> None:
        with self.engine.begin() as c:
            c.execute(update(candidates).where(candidates.c.id == cand.id).values(
                status="evaluated", evaluation=json.dumps(cand.evaluation.to_dict(), default=str),
                fitness=cand.fitness, correct=cand.correct, evaluated_at=time.time()))
            if state is not None:
                self.put("state", state, conn=c)

    def rows(self, status: str | None = None) -> list[dict]:
        q = select(candidates).order_by(candidates.c.id)
        if status:
            q = q.where(candidates.c.status == status)
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def call_rows(self) -> list[dict]:
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(select(calls).order_by(calls.c.id))]

    def load_candidates(self, statuses=("evaluated", "pending")) -> list[Candidate]:
        out = []
        for r in self.rows():
            if r["status"] not in statuses:
                continue
            cand = Candidate(id=r["id"], source=r["source"], operator=r["operator"], parent_id=r["parent_id"],
                             generation=r["generation"] or 0, genome=json.loads(r["genome"] or "{}"),
                             island=r["island"] or 0, inspirations=json.loads(r["inspirations"] or "[]"))
            if r["evaluation"] and r["status"] == "evaluated":
                cand.evaluation = Evaluation.from_dict(json.loads(r["evaluation"]))
            if r["model"]:
                cand.genome.setdefault("model", r["model"])
            out.append(cand)
        return out


def _call_row(comp: Completion) -> dict:
    p, u = comp.prompt, comp.usage
    return {"model": comp.model, "kind": p.kind if p else None, "system": p.system if p else None,
            "static": p.static if p else None, "dynamic": p.dynamic if p else None, "response": comp.text,
            "error": comp.error, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens, "cache_write_tokens": u.cache_write_tokens, "cost": u.cost,
            "latency_s": comp.latency_s, "attempts": comp.attempts, "temperature": comp.temperature,
            "top_p": comp.top_p, "created": time.time()}
