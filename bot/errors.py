"""Errors a user can act on: each names the cause and the fix, in one paragraph."""
from __future__ import annotations


class UserError(Exception):
    """A problem with the input (config, kernel, target checkout, machine), not a bug in kernelsmith."""

    def __init__(self, cause: str, fix: str):
        super().__init__(cause)
        self.cause = cause
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.cause.rstrip('.')}. {self.fix}"
