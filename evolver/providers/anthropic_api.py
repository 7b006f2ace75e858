"""The Anthropic Messages API through the ``anthropic`` client; the static prompt prefix is cached.

The current Messages API takes no ``temperature`` or ``top_p`` (the client refuses them), so a preset's
sampling settings apply to OpenAI-compatible servers only; the run store records them as not sent.
"""
from __future__ import annotations

from .base import ModelSpec, Prompt, Provider, TransientError, Usage, retry_after


class AnthropicProvider(Provider):
    sends_sampling = False
    def __init__(self, spec: ModelSpec, **kw):
        super().__init__(spec, **kw)
        import anthropic

        self._anthropic = anthropic
        self.client = anthropic.Anthropic(api_key=spec.api_key() or "unset", base_url=spec.base_url,
                                          max_retries=0, timeout=spec.timeout_s)

    def _call(self, prompt: Prompt, temperature: float | None, top_p: float | None) -> tuple[str, Usage]:
        a = self._anthropic
        try:
            resp = self.client.messages.create(
                model=self.spec.model, max_tokens=self.spec.max_tokens,
                system=[{"type": "text", "text": prompt.system}],
                messages=[{"role": "user", "content": [
                    {"type": "text", "text": prompt.static, "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": prompt.dynamic}]}])
        except a.APIStatusError as exc:
            if exc.status_code == 429 or exc.status_code >= 500:
                raise TransientError(f"HTTP {exc.status_code}", retry_after(exc.response.headers)) from None
            raise RuntimeError(f"HTTP {exc.status_code}: {str(exc.message)[:200]}") from None
        except (a.APITimeoutError, a.APIConnectionError) as exc:
            raise TransientError(type(exc).__name__) from None
        text = "".join(block.text for block in resp.content if getattr(block, "type", "") == "text")
        u = resp.usage
        usage = Usage(input_tokens=u.input_tokens or 0, output_tokens=u.output_tokens or 0,
                      cache_read_tokens=getattr(u, "cache_read_input_tokens", 0) or 0,
                      cache_write_tokens=getattr(u, "cache_creation_input_tokens", 0) or 0)
        return text, usage
