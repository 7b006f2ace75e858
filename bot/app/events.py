"""The durable inbox: stored deliveries are handled one at a time, in the order received.

Each ends in a recorded state with its reason: `done` (the App acted), `ignored` (nothing to do, or a payload
that lacks what the App needs: `ignored.Ignored`), `failed` (GitHub refused for good: 403, 404, 422; or a bug).
A delivery that meets a GitHub rate limit or outage stays pending and is tried again later. Nothing is dropped
silently.
"""
from __future__ import annotations

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

log = logging.getLogger("kernelsmith.events")
MAX_ATTEMPTS = 6


def handle_ping(ctx: AppContext, payload: dict) -> str:
    return f"pong (zen: {str(payload.get('zen') or '')[:200]})"


HANDLERS = {
    "issue_comment": handle_comment,
    "push": handle_push,
    "installation": handle_installation,
    "installation_repositories": handle_installation,
    "ping": handle_ping,
    "pull_request": handle_pull_request,
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
            self.process(delivery)

    def process(self, delivery) -> None:
        store = self.ctx.store
        handler = HANDLERS.get(delivery.event)
        if handler is None:
            store.finish_delivery(delivery.id, "ignored", f"event {delivery.event} is not handled")
            return
        try:
            payload = json.loads(delivery.payload)
            if not isinstance(payload, dict):
                raise Ignored(f"malformed {delivery.event} payload: a JSON object was expected")
            outcome = handler(self.ctx, payload)
            store.finish_delivery(delivery.id, "done", outcome or "done")
        except Ignored as exc:
            store.finish_delivery(delivery.id, "ignored", str(exc))
        except Exception as exc:
            refusal = classify(exc, delivery.attempts + 1)
            if refusal is None:
                log.exception("delivery %s (%s) failed", delivery.id, delivery.event)
                store.finish_delivery(delivery.id, "failed", f"internal error: {type(exc).__name__}: {exc}")
            elif refusal.retry_at and delivery.attempts + 1 < MAX_ATTEMPTS:
                log.warning("delivery %s: %s", delivery.id, refusal.message)
                store.finish_delivery(delivery.id, "pending", refusal.message, retry_at=refusal.retry_at)
            else:
                log.warning("delivery %s failed: %s", delivery.id, refusal.message)
                store.finish_delivery(delivery.id, "failed", refusal.message)
