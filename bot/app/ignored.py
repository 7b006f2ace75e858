"""How a handler says that a delivery needs nothing from the App: it raises `Ignored` with the reason, and the
inbox records the delivery as `ignored` with that reason (a handler that acted returns what it did: `done`)."""
from __future__ import annotations


class Ignored(Exception):
    """The delivery asks nothing of the App; the message says why (stored as the delivery's outcome)."""
