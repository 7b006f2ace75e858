"""Both wire formats against a real HTTP server on loopback: answers, usage and cost, prompt caching,
retries on 429 and 500, timeouts, API keys kept out of everything but the request, and the bandit."""
import logging
import random
import time

import pytest
from engine_fixtures import RecordedLLM, models_file

from evolver.providers import Ensemble, ModelSpec, Prompt, load_models
from evolver.providers.base import Completion, Usage, retry_after
from evolver.providers.models_file import ModelsFileError, make_provider

KEY = "sk-test-do-not-log-0123456789"
PROMPT = Prompt(system="be fast", static="# Task\n" + "static " * 200, dynamic="## Parent\nx = 1")


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("KS_TEST_LLM_KEY", KEY)


def spec(url: str, provider: str, **kw) -> ModelSpec:
    base = url + "/v1" if provider == "openai" else url
    values = {"name": provider, "provider": provider, "model": "m", "base_url": base,
              "api_key_env": "KS_TEST_LLM_KEY", "timeout_s": 2, "max_retries": 2, "backoff_s": 0.01,
              "price": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}}
    values.update(kw)
    return ModelSpec(**values)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_answer_usage_cost_and_retries(provider, caplog):
    caplog.set_level(logging.DEBUG)
    script = [{"status": 429}, {"status": 500}, {"text": "hello ```python\nx = 2\n```"}]
    with RecordedLLM(script) as server:
        out = make_provider(spec(server.url, provider)).complete(PROMPT, temperature=0.6, top_p=0.95)
        bodies = [r["body"] for r in server.requests]
        headers = server.requests[-1]["headers"]
    assert out.error == "" and out.text.startswith("hello") and out.attempts == 3
    assert out.usage.calls == 1 and out.usage.output_tokens > 0
    assert out.usage.cost == pytest.approx((out.usage.input_tokens * 3 + out.usage.output_tokens * 15 +
                                            out.usage.cache_write_tokens * 3.75 +
                                            out.usage.cache_read_tokens * 0.3) / 1e6)
    if provider == "openai":
        assert all(b["temperature"] == 0.6 and b["top_p"] == 0.95 for b in bodies)
    else:  # the Messages API takes no sampling settings any more
        assert all("temperature" not in b for b in bodies) and out.temperature is None
    lower = {k.lower(): v for k, v in headers.items()}
    sent_key = lower.get("x-api-key") or lower.get("authorization", "")
    assert KEY in sent_key  # the key reaches the server ...
    assert KEY not in caplog.text and KEY not in repr(out) and KEY not in repr(spec("u", provider))  # ... only


def test_anthropic_caches_the_static_prefix():
    with RecordedLLM([{"text": "a"}]) as server:
        provider = make_provider(spec(server.url, "anthropic"))
        first = provider.complete(PROMPT)
        second = provider.complete(Prompt(PROMPT.system, PROMPT.static, "## another parent"))
        body = server.requests[0]["body"]
    blocks = body["messages"][0]["content"]
    assert blocks[0]["cache_control"] == {"type": "ephemeral"} and blocks[0]["text"] == PROMPT.static
    assert "cache_control" not in blocks[1]
    assert first.usage.cache_write_tokens > 0 and first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens and second.usage.cost < first.usage.cost


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_persistent_errors_and_timeouts_come_back_as_errors_quickly(provider):
    with RecordedLLM([{"status": 500}]) as server:
        out = make_provider(spec(server.url, provider)).complete(PROMPT)
    assert out.error and "500" in out.error and out.attempts == 3 and out.usage.errors == 1
    with RecordedLLM([{"delay": 3, "text": "late"}]) as server:
        start = time.monotonic()
        out = make_provider(spec(server.url, provider, timeout_s=0.5, max_retries=1)).complete(PROMPT)
    assert "Timeout" in out.error and out.attempts == 2 and time.monotonic() - start < 5
    with RecordedLLM([{"status": 400}]) as server:  # a client error is not retried
        out = make_provider(spec(server.url, provider)).complete(PROMPT)
    assert out.attempts == 1 and "400" in out.error


def test_models_file(tmp_path):
    path = models_file(tmp_path, "http://127.0.0.1:9", provider="anthropic")
    (m,) = load_models(path)
    assert m.provider == "anthropic" and m.api_key() == KEY and m.price.cache_read == 0.1
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  - {name: a, provider: gemini, model: x}\n")
    with pytest.raises(ModelsFileError, match="provider must be"):
        load_models(bad)
    bad.write_text("models: []\n")
    with pytest.raises(ModelsFileError):
        load_models(bad)


class FakeProvider:
    """A provider with a fixed price per call (the bandit's arithmetic, no HTTP)."""

    def __init__(self, name, cost):
        self.spec = ModelSpec(name=name, provider="openai", model=name)
        self.cost = cost

    def complete(self, prompt, temperature=None, top_p=None):
        return Completion(model=self.spec.name, text="x", usage=Usage(calls=1, cost=self.cost))


def test_bandit_shifts_calls_to_models_that_win_per_unit_cost():
    cheap, dear = FakeProvider("cheap", 0.01), FakeProvider("dear", 0.10)
    ens = Ensemble([cheap.spec, dear.spec], providers=[cheap, dear])
    rng = random.Random(0)
    for _ in range(60):  # equal win rates: the cheaper model should take most calls
        name = ens.complete(PROMPT, rng).model
        ens.record_outcome(name, rng.random() < 0.5)
    late = [ens.complete(PROMPT, rng).model for _ in range(100)]
    assert late.count("cheap") > 70
    ens2 = Ensemble([cheap.spec, dear.spec], providers=[cheap, dear])
    for _ in range(60):  # the cheap one never wins, the dear one always: worth its price
        name = ens2.complete(PROMPT, rng).model
        ens2.record_outcome(name, name == "dear")
    late = [ens2.choose(rng) for _ in range(100)]
    assert late.count("dear") > 70
    state = ens2.state()
    ens3 = Ensemble([cheap.spec, dear.spec], providers=[cheap, dear])
    ens3.restore(state)
    assert ens3.state() == state and ens3.total().cost == pytest.approx(ens2.total().cost)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_429_waits_as_long_as_retry_after_says(provider):
    waits = []
    script = [{"status": 429, "retry_after": 7}, {"text": "ok"}]
    with RecordedLLM(script) as server:
        out = make_provider(spec(server.url, provider), sleep=waits.append).complete(PROMPT)
    assert out.error == "" and out.attempts == 2 and waits == [7.0]  # not the 0.01 s back-off
    assert retry_after({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}) is None
