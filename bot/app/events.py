"""The durable inbox: stored deliveries are handled one at a time, in the order received.

Each ends in a recorded state with its reason: `done` (the App acted), `ignored` (nothing to do, or a payload
that lacks what the App needs: `ignored.Ignored`), `failed` (GitHub refused for good: 403, 404, 422; or a bug).
A delivery that meets a GitHub rate limit or outage stays pending and is tried again later. Nothing is dropped
silently.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import threading

from .comment_commands import handle_comment
from .config_checks import handle_push
from .context import AppContext
from .ignored import Ignored
from .installations import handle_installation
from .outcomes import classify
from .pull_requests import handle_pull_request
from .repositories import handle_repository

log = logging.getLogger("kernelsmith.events")
MAX_ATTEMPTS = 6


def handle_ping(ctx: AppContext, payload: dict, delivery: str = "") -> str:
    return f"pong (zen: {str(payload.get('zen') or '')[:200]})"


HANDLERS = {
    "issue_comment": handle_comment,
    "push": handle_push,
    "installation": handle_installation,
    "installation_repositories": handle_installation,
    "ping": handle_ping,
    "pull_request": handle_pull_request,
    "repository": handle_repository,
}


class EventProcessor:
    def __init__(self, ctx: AppContext, poll: float = 0.5):
        self.ctx, self.poll = ctx, poll
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ks-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        self._thread.join(timeout=5)

    def wake(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                delivery = self.ctx.store.next_delivery()
            except Exception:
                log.exception("reading the inbox failed")
                delivery = None
            if delivery is None:
                with self._wake:
                    self._wake.wait(self.poll)
                continue
            try:
                self.process(delivery)
            except Exception:  # the inbox outlives anything one delivery meets (the store busy past its timeout)
                log.exception("delivery %s could not be recorded; it stays pending", delivery.id)
                with self._wake:
                    self._wake.wait(self.poll)

    def process(self, delivery) -> None:
        """Handle one delivery and record how it ended. A failure to record (the store busy) reaches the caller
        and the delivery stays pending: it is handled again, as GitHub's own redelivery would be."""
        state, outcome, retry_at = self.handle(delivery)
        self.ctx.store.finish_delivery(delivery.id, state, outcome, retry_at=retry_at)

    def handle(self, delivery) -> tuple[str, str, dt.datetime | None]:
        handler = HANDLERS.get(delivery.event)
        if handler is None:
            return "ignored", f"event {delivery.event} is not handled", None
        try:
            try:
                payload = json.loads(delivery.payload)
            except (ValueError, RecursionError):  # stored before the door refused such bodies
                payload = None
            if not isinstance(payload, dict):
                raise Ignored(f"malformed {delivery.event} payload: a JSON object was expected")
            return "done", handler(self.ctx, payload, delivery.id) or "done", None
        except Ignored as exc:
            return "ignored", str(exc), None
        except Exception as exc:
            refusal = classify(exc, delivery.attempts + 1)
            if refusal is None:
                log.exception("delivery %s (%s) failed", delivery.id, delivery.event)
                return "failed", f"internal error: {type(exc).__name__}: {exc}", None
            if refusal.retry_at and delivery.attempts + 1 < MAX_ATTEMPTS:
                log.warning("delivery %s: %s", delivery.id, refusal.message)
                return "pending", refusal.message, refusal.retry_at
            log.warning("delivery %s failed: %s", delivery.id, refusal.message)
            return "failed", refusal.message, None
