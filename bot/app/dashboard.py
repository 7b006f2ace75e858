"""The job pages: `GET /` lists jobs and their state; `GET /jobs/{id}` shows the report (markdown rendered to
HTML) and the search's best speedup against evaluations, drawn by Chart.js served from /static (no CDN)."""
from __future__ import annotations

import json
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse
from markdown_it import MarkdownIt
from starlette.concurrency import run_in_threadpool

from . import rendering
from .context import AppContext

STATIC = Path(__file__).parent / "static"


def best_curve(out: Path | None) -> list[dict]:
    """[{evaluation, best, fitness}] over the search's candidates (the baseline, id 0, is left out)."""
    points, best = [], None
    try:
        lines = (out / "candidates.jsonl").read_text().splitlines() if out else []
    except OSError:
        return []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:  # a line cut short (the run was killed while writing it)
            continue
        if not isinstance(row, dict):
            continue
        if row.get("id") == 0 or row.get("operator") == "baseline":
            continue
        fitness = row.get("fitness")
        if fitness is not None:
            best = fitness if best is None else max(best, fitness)
        points.append({"evaluation": len(points) + 1, "best": best, "fitness": fitness})
    return points


def report_html(out: Path | None) -> str:
    try:
        text = (out / "report.md").read_text() if out else ""
    except OSError:
        return ""
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def router(ctx: AppContext) -> APIRouter:
    r = APIRouter()

    @r.get("/", response_class=HTMLResponse)
    async def index():
        jobs = await run_in_threadpool(ctx.store.jobs)
        return rendering.page("index", jobs=jobs)

    @r.get("/jobs/{job_id}", response_class=HTMLResponse)
    async def job_page(job_id: int):
        job = await run_in_threadpool(ctx.store.get, job_id) if 0 < job_id < 2**63 else None
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        out = Path(job.out_dir) if job.out_dir else None
        points = best_curve(out)
        return rendering.page("job", job=job, report=report_html(out), points=points,
                              timed=any(p["best"] is not None for p in points))

    return r
