"""Any OpenAI-compatible chat-completions server (OpenAI, vLLM, SGLang, LMDeploy) through the ``openai`` client."""
from __future__ import annotations

from .base import ModelSpec, Prompt, Provider, TransientError, Usage, retry_after


class OpenAIProvider(Provider):
    def __init__(self, spec: ModelSpec, **kw):
        super().__init__(spec, **kw)
        import openai

        self._openai = openai
        self.client = openai.OpenAI(api_key=spec.api_key() or "unset", base_url=spec.base_url,
                                    max_retries=0, timeout=spec.timeout_s)

    def _call(self, prompt: Prompt, temperature: float | None, top_p: float | None) -> tuple[str, Usage]:
        o = self._openai
        extra = {}
        if temperature is not None:
            extra["temperature"] = temperature
        if top_p is not None:
            extra["top_p"] = top_p
        try:
            resp = self.client.chat.completions.create(
                model=self.spec.model, max_tokens=self.spec.max_tokens,
                messages=[{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}],
                **extra)
        except o.APIStatusError as exc:
            if exc.status_code == 429 or exc.status_code >= 500:
                raise TransientError(f"HTTP {exc.status_code}", retry_after(exc.response.headers)) from None
            raise RuntimeError(f"HTTP {exc.status_code}: {str(exc.message)[:200]}") from None
        except (o.APITimeoutError, o.APIConnectionError) as exc:
            raise TransientError(type(exc).__name__) from None
        if not resp.choices:
            raise RuntimeError("the answer holds no choices")
        text = resp.choices[0].message.content or ""
        u = resp.usage
        cached = 0
        if u is not None and getattr(u, "prompt_tokens_details", None) is not None:
            cached = getattr(u.prompt_tokens_details, "cached_tokens", 0) or 0
        usage = Usage(input_tokens=(u.prompt_tokens - cached) if u else 0,
                      output_tokens=u.completion_tokens if u else 0, cache_read_tokens=cached)
        return text, usage
