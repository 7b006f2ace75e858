"""Shared pieces of the engine tests: the softmax task on the interpreter and the loopback LLM server."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tinyserve"




def _load_server():
    """The loopback LLM server, loaded by path (an installed `tests` package must not shadow it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ks_llm_server", ROOT / "tests/llm_server/server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RecordedLLM


RecordedLLM = _load_server()

__all__ = ["EXAMPLE", "RECORDED", "ROOT", "SCRIPTS", "RecordedLLM", "models_file"]
SCRIPTS = ROOT / "tests" / "llm_server" / "scripts"
RECORDED = ROOT / "tests" / "llm_server" / "recorded"


@pytest.fixture(scope="session")
def softmax_bundle(tmp_path_factory) -> Path:
    from bot.config import load_config, task_spec
    from runners.extract import build_bundle

    config = load_config(EXAMPLE)
    spec = task_spec("softmax", config.kernels["softmax"], "interpret")
    bundle = tmp_path_factory.mktemp("softmax-bundle")
    build_bundle(EXAMPLE, spec, bundle)
    return bundle


@pytest.fixture(scope="session")
def softmax_evaluator(softmax_bundle):
    from runners.sandbox import Evaluator

    with Evaluator(softmax_bundle, "interpret", timeout=120, trials=1) as evaluator:
        yield evaluator


def models_file(tmp_path: Path, url: str, provider: str = "openai", **extra) -> Path:
    spec = {"name": f"local-{provider}", "provider": provider, "model": "recorded",
            "base_url": url + ("/v1" if provider == "openai" else ""), "api_key_env": "KS_TEST_LLM_KEY",
            "timeout_s": 5, "max_retries": 2, "backoff_s": 0.01,
            "price": {"input": 1.0, "output": 2.0, "cache_read": 0.1, "cache_write": 1.25}, **extra}
    path = tmp_path / f"models-{provider}.yaml"
    path.write_text(json.dumps({"models": [spec]}))  # JSON is YAML
    return path
