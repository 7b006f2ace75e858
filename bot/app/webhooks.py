"""`POST /webhook`: size and signature checks on the raw body, then its headers and JSON (`webhook_request`); the
delivery is stored, then answered: 202 (queued, or ignored: an event the App does not handle), 200 for a
delivery id seen before; 400, 401 or 413 for a request that is refused, and then nothing is stored.

Nothing here talks to GitHub: the stored delivery is handled by `events.EventProcessor`, so the answer goes
out within milliseconds and a restart loses nothing that was acknowledged.
"""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from . import signature
from .context import AppContext
from .events import HANDLERS
from .webhook_request import Refused, check_headers, read


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
        except ClientDisconnect:  # the sender went away mid-body: nothing to store, nobody to answer
            return JSONResponse({"error": "the body was cut short"}, status_code=400)
        if not signature.valid(ctx.settings.webhook_secret, body, request.headers.get("x-hub-signature-256")):
            return JSONResponse({"error": "bad or missing X-Hub-Signature-256"}, status_code=401)
        event, delivery = request.headers.get("x-github-event"), request.headers.get("x-github-delivery")
        try:
            check_headers(event, delivery)
            # parsing up to max_body of JSON takes milliseconds: off the event loop
            req = await run_in_threadpool(read, body, request.headers.get("content-type", ""), event, delivery)
        except Refused as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        handled = event in HANDLERS
        stored = await run_in_threadpool(
            ctx.store.add_delivery, req.delivery, req.event, req.action, req.payload,
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
