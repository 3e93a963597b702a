"""Which client speaks to a model: OpenAI's chat completions (OpenAI,
Gemini, Ollama, vLLM, llama.cpp through their OpenAI-compatible endpoints)
or Anthropic's Messages API. Both have one interface: ``create``,
``stream``, ``create_json``, ``usage``, ``to_config``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import ConfigurationError
from ._anthropic import AnthropicClient
from ._model import ModelClient

__all__ = ["PROVIDERS", "ChatModel", "model_client", "model_from_config"]

ChatModel = ModelClient | AnthropicClient
PROVIDERS: dict[str, type[ModelClient | AnthropicClient]] = {
    "openai": ModelClient,
    "anthropic": AnthropicClient,
}


def provider_of(model: str, provider: str | None) -> str:
    if provider is None:
        return "anthropic" if model.startswith("claude") else "openai"
    if provider not in PROVIDERS:
        raise ConfigurationError(
            f"provider={provider!r}: use one of {', '.join(PROVIDERS)} "
            "(Gemini, Ollama and vLLM speak 'openai' at their compatible endpoint)"
        )
    return provider


def model_client(model: str, *, provider: str | None = None, **options: Any) -> ChatModel:
    """A client for ``model``: ``provider`` "openai" or "anthropic"; by
    default a ``claude-*`` name goes to Anthropic, the rest to OpenAI's API."""
    return PROVIDERS[provider_of(model, provider)](model, **options)


def model_from_config(config: Mapping[str, Any], *, api_key: str | None = None) -> ChatModel:
    """The client a ``to_config()`` describes (a config without a provider is OpenAI's)."""
    provider = provider_of(str(config.get("model", "")), config.get("provider") or "openai")
    return PROVIDERS[provider].from_config(config, api_key=api_key)
