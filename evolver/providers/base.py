"""What every provider shares: the prompt, one completion, usage and cost, and retries with back-off.

API keys are read from the environment variable a model names, handed to the client object and nowhere
else: never logged, never stored, never put into a worker's environment (the sandbox scrubs *KEY* names).
"""
from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

log = logging.getLogger("kernelsmith")


class Price(BaseModel):
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class ModelSpec(BaseModel):
    name: str  # how the run refers to it (bandit arm, accounting row)
    provider: str  # anthropic | openai
    model: str  # the provider's model id
    base_url: str | None = None
    api_key_env: str | None = None  # the environment variable holding the key (never the key itself)
    price: Price = Field(default_factory=Price)
    max_tokens: int = 8192
    temperature: float | None = None  # None: the run's setting
    top_p: float | None = None
    timeout_s: float = 180.0
    max_retries: int = 4
    backoff_s: float = 2.0  # first retry waits this long, doubling, with jitter, capped at 60 s

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


@dataclass
class Prompt:
    system: str
    static: str  # the same for every call of a run: cached by the provider where it can be
    dynamic: str  # parent, feedback, inspirations, instructions
    kind: str = "rewrite"

    @property
    def user(self) -> str:
        return self.static + "\n\n" + self.dynamic


@dataclass
class Usage:
    calls: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    def add(self, other: Usage) -> None:
        for name in ("calls", "errors", "input_tokens", "output_tokens", "cache_read_tokens",
                     "cache_write_tokens", "cost"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Completion:
    model: str  # ModelSpec.name
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    attempts: int = 0
    error: str = ""  # empty when a text came back
    prompt: Prompt | None = None
    temperature: float | None = None
    top_p: float | None = None


def cost_of(usage: Usage, price: Price) -> float:
    return (usage.input_tokens * price.input + usage.output_tokens * price.output
            + usage.cache_read_tokens * price.cache_read + usage.cache_write_tokens * price.cache_write) / 1e6


class TransientError(Exception):
    """A 429, a 5xx, a timeout or a dropped connection: worth another try (after ``retry_after`` seconds when
    the server said so)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(headers) -> float | None:
    """Seconds from a Retry-After header (a number; an HTTP date is ignored), or None."""
    try:
        value = float((headers or {}).get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


class Provider:
    """One model behind one client. Subclasses implement ``_call(prompt, temperature, top_p) -> (text, usage)``."""

    sends_sampling = True  # temperature and top_p reach the model

    def __init__(self, spec: ModelSpec, sleep: Callable[[float], None] = time.sleep):
        self.spec = spec
        self.sleep = sleep
        self._jitter = random.Random()  # back-off jitter only: never part of the search's random state

    def _call(self, prompt: Prompt, temperature: float | None, top_p: float | None) -> tuple[str, Usage]:
        raise NotImplementedError

    def complete(self, prompt: Prompt, temperature: float | None = None, top_p: float | None = None) -> Completion:
        """One completion; transient failures are retried with back-off, and every failure comes back as
        ``Completion.error`` (a run never crashes on its LLM)."""
        temperature = self.spec.temperature if self.spec.temperature is not None else temperature
        top_p = self.spec.top_p if self.spec.top_p is not None else top_p
        if not self.sends_sampling:
            temperature = top_p = None
        out = Completion(model=self.spec.name, prompt=prompt, temperature=temperature, top_p=top_p)
        start = time.monotonic()
        for attempt in range(self.spec.max_retries + 1):
            out.attempts = attempt + 1
            try:
                text, usage = self._call(prompt, temperature, top_p)
            except TransientError as exc:
                out.error = f"{type(exc).__name__}: {exc}"
                if attempt < self.spec.max_retries:
                    delay = min(60.0, self.spec.backoff_s * 2 ** attempt) * (0.5 + self._jitter.random())
                    if exc.retry_after is not None:  # the server knows best, within the same cap
                        delay = min(60.0, max(delay, exc.retry_after))
                    log.info("model %s: %s; retry %d in %.1f s", self.spec.name, exc, attempt + 1, delay)
                    self.sleep(delay)
                continue
            except Exception as exc:  # noqa: BLE001 - a 4xx or a malformed answer: not worth repeating
                out.error = f"{type(exc).__name__}: {str(exc)[:300]}"
                break
            usage.calls = 1
            usage.cost = cost_of(usage, self.spec.price)
            out.text, out.usage, out.error = text, usage, ""
            break
        if out.error:
            out.usage.calls, out.usage.errors = 1, 1
        out.latency_s = time.monotonic() - start
        return out
