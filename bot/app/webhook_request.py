"""What a signed webhook request must hold before it is stored, and why one is refused (always a 4xx, never a
crash): GitHub's event and delivery headers, and a body that is one JSON object in UTF-8, sent as
`application/json` or form-encoded (`payload=...`, a repository webhook's other content type)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import parse_qs

EVENT = re.compile(r"[a-z0-9_.-]{1,50}", re.IGNORECASE)
DELIVERY = re.compile(r"[a-z0-9_.:-]{1,100}", re.IGNORECASE)
FORM = "application/x-www-form-urlencoded"
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # a \uD800-\uDFFF escape: maybe an unpaired half


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class WebhookRequest:
    delivery: str
    event: str
    action: str | None
    payload: str  # the JSON text of the payload, as sent


def check_headers(event: str | None, delivery: str | None) -> None:
    if not event or not delivery:
        raise Refused(400, "X-GitHub-Event and X-GitHub-Delivery are required")
    if not EVENT.fullmatch(event):
        raise Refused(400, "X-GitHub-Event must be an event name (letters, digits, _ . -; at most 50)")
    if not DELIVERY.fullmatch(delivery):
        raise Refused(400, "X-GitHub-Delivery must be an id (letters, digits, _ . : -; at most 100)")


def _payload_text(body: bytes, content_type: str) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "the body is not UTF-8") from None
    if content_type.split(";")[0].strip().lower() != FORM:
        return text
    try:
        fields = parse_qs(text, keep_blank_values=True, strict_parsing=False, max_num_fields=20)
    except ValueError:
        raise Refused(400, "the form-encoded body has too many fields") from None
    if len(fields.get("payload", [])) != 1:
        raise Refused(400, "a form-encoded delivery needs exactly one `payload` field")
    return fields["payload"][0]


def read(body: bytes, content_type: str, event: str, delivery: str) -> WebhookRequest:
    """The delivery to store; `Refused` (400) for a body that is not one JSON object in valid UTF-8."""
    text = _payload_text(body, content_type)
    try:
        payload = json.loads(text)
    except RecursionError:
        raise Refused(400, "the body is JSON nested too deeply") from None
    except ValueError:
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(payload, dict):
        kind = {list: "an array", str: "a string", type(None): "null", bool: "a boolean"}.get(type(payload), "a number")
        raise Refused(400, f"the body is JSON but {kind}, not an object")
    if _SURROGATE.search(text):
        try:
            json.dumps(payload, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise Refused(400, "the body's JSON holds an unpaired UTF-16 surrogate (not valid Unicode)") from None
        except RecursionError:
            raise Refused(400, "the body is JSON nested too deeply") from None
    action = payload.get("action")
    return WebhookRequest(delivery, event, action[:50] if isinstance(action, str) else None, text)
