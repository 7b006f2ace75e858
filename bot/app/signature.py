"""GitHub's webhook signature: HMAC-SHA256 of the raw body with the webhook secret, compared in constant time."""
from __future__ import annotations

import hashlib
import hmac


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def valid(secret: bytes, body: bytes, header: str | None) -> bool:
    if not header or not header.startswith("sha256="):
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.encode())
