"""Choose an LLM provider from a model string such as ``"openai/gpt-4o-mini"``."""

from __future__ import annotations

from typing import Any

from tiermem.errors import ConfigError
from tiermem.llm.anthropic import AnthropicModel
from tiermem.llm.base import HttpChatModel
from tiermem.llm.openai import OpenAIModel

PROVIDERS: dict[str, type[HttpChatModel]] = {
    "openai": OpenAIModel,
    "anthropic": AnthropicModel,
}


def get_llm(model: str, **options: Any) -> HttpChatModel:
    """Build the LLM named ``provider/model`` (``provider:model`` is accepted too).

    Examples: ``get_llm("openai/gpt-4o-mini")``, ``get_llm("anthropic/claude-3-5-haiku-latest")``,
    ``get_llm("openai/llama3.1:8b", base_url="http://localhost:11434/v1")``.
    Keyword options go to the provider (``api_key``, ``base_url``, ``timeout``, ``temperature``...).
    """
    if not isinstance(model, str):
        raise ConfigError("model", f"expected a str like 'openai/gpt-4o-mini', got {model!r}")
    for separator in ("/", ":"):
        provider, found, name = model.partition(separator)
        if found and provider.lower() in PROVIDERS and name.strip():
            return PROVIDERS[provider.lower()](name, **options)
    raise ConfigError(
        "model",
        f"{model!r} does not name a provider",
        f"write '<provider>/<model>' with provider one of {sorted(PROVIDERS)}",
    )
