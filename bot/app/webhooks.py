"""`POST /webhook`: signature, size and duplicate checks on the raw body; the delivery is stored, then answered.

Nothing here talks to GitHub: the stored delivery is handled by `events.EventProcessor`, so the answer goes
out within milliseconds and a restart loses nothing that was acknowledged.
"""
from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from . import signature
from .context import AppContext
from .events import HANDLERS



class TooLarge(Exception):
    pass


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def router(ctx: AppContext) -> APIRouter:
    r = APIRouter()

    @r.post("/webhook")
    async def webhook(request: Request):
        try:
            body = await _read_limited(request, ctx.settings.max_body)
        except TooLarge:
            return JSONResponse({"error": f"body larger than {ctx.settings.max_body} bytes"}, status_code=413)
        if not signature.valid(ctx.settings.webhook_secret, body, request.headers.get("x-hub-signature-256")):
            return JSONResponse({"error": "bad or missing X-Hub-Signature-256"}, status_code=401)
        event, delivery = request.headers.get("x-github-event"), request.headers.get("x-github-delivery")
        if not event or not delivery:
            return JSONResponse({"error": "X-GitHub-Event and X-GitHub-Delivery are required"}, status_code=400)
        try:
            payload = json.loads(body)
            action = payload.get("action") if isinstance(payload, dict) else None
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        handled = event in HANDLERS
        stored = await run_in_threadpool(
            ctx.store.add_delivery, delivery, event, action, body.decode("utf-8", "replace"),
            "pending" if handled else "ignored", None if handled else f"event {event} is not handled")
        if not stored:
            return JSONResponse({"status": "duplicate", "delivery": delivery}, status_code=200)
        if not handled:
            return JSONResponse({"status": "ignored", "event": event, "delivery": delivery}, status_code=202)
        ctx.wake_events()
        return JSONResponse({"status": "queued", "event": event, "delivery": delivery}, status_code=202)

    @r.get("/healthz")
    async def healthz():
        pending = await run_in_threadpool(ctx.store.pending_deliveries)
        return {"ok": True, "pending_deliveries": pending}

    return r
