"""LLM providers: the Anthropic Messages API and any OpenAI-compatible server, and an ensemble of them."""
from .base import Completion, ModelSpec, Prompt, Usage
from .ensemble import Ensemble
from .models_file import load_models

__all__ = ["Completion", "Ensemble", "ModelSpec", "Prompt", "Usage", "load_models"]
