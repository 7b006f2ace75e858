"""Models and prices from a YAML file::

    models:
      - name: claude
        provider: anthropic            # anthropic | openai (any OpenAI-compatible server)
        model: claude-sonnet-4-5
        api_key_env: ANTHROPIC_API_KEY # the key itself never appears in the file
        price: {input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75}   # USD per million tokens
      - name: local
        provider: openai
        base_url: http://127.0.0.1:8000/v1
        model: Qwen/Qwen2.5-Coder-32B-Instruct
"""
from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from .base import ModelSpec


class ModelsFile(BaseModel):
    models: list[ModelSpec]


class ModelsFileError(ValueError):
    pass


def load_models(path: Path) -> list[ModelSpec]:
    try:
        data = yaml.safe_load(Path(path).read_text())
        models = ModelsFile.model_validate(data).models
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise ModelsFileError(f"cannot read models file {path}: {exc}") from None
    names = [m.name for m in models]
    if not models or len(set(names)) != len(names):
        raise ModelsFileError(f"models file {path} must list at least one model, each with a unique name")
    for m in models:
        if m.provider not in ("anthropic", "openai"):
            raise ModelsFileError(f"model {m.name}: provider must be anthropic or openai, not {m.provider!r}")
    return models


def make_provider(spec: ModelSpec, **kw):
    if spec.provider == "anthropic":
        from .anthropic_api import AnthropicProvider

        return AnthropicProvider(spec, **kw)
    from .openai_api import OpenAIProvider

    return OpenAIProvider(spec, **kw)
