"""Anthropic messages API (``POST {base_url}/v1/messages``)."""

from __future__ import annotations

from typing import Any

from tiermem.errors import InputError
from tiermem.llm.base import ChatMessage, Completion, HttpChatModel
from tiermem.messages import from_openai_messages, to_anthropic_messages

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024


class AnthropicModel(HttpChatModel):
    """A Claude model. Reads ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` when not given.

    Messages are converted with :func:`tiermem.messages.to_anthropic_messages`: system
    messages become the ``system`` field, assistant tool calls become ``tool_use``
    blocks and tool messages ``tool_result`` blocks. ``max_tokens`` (required by the
    API) defaults to 1024.

    Args:
        model: the model name (``"claude-3-5-haiku-latest"``).
        api_key: default ``$ANTHROPIC_API_KEY``; required.
        base_url: default ``$ANTHROPIC_BASE_URL`` or https://api.anthropic.com.
        timeout, max_retries, backoff, **options: see :class:`~tiermem.llm.HttpChatModel`.
    """

    provider = "anthropic"
    default_model = "claude-3-5-haiku-latest"
    default_base_url = DEFAULT_BASE_URL
    base_url_env = "ANTHROPIC_BASE_URL"
    key_env = "ANTHROPIC_API_KEY"

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def _request(
        self, messages: list[ChatMessage], options: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        self._check_key()
        system, turns = to_anthropic_messages(from_openai_messages(messages))
        if not turns:
            raise InputError(
                "messages", "holds only system messages", "add at least one user message"
            )
        body: dict[str, Any] = {"model": self.model, "max_tokens": DEFAULT_MAX_TOKENS}
        if system:
            body["system"] = system
        body.update(options)
        body["messages"] = turns
        return "/v1/messages", body

    def _parse(self, data: dict[str, Any]) -> Completion:
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise self._bad_response("no content blocks", data)
        text = "".join(
            str(b.get("text", ""))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text"
        )
        return self._completion(
            data, text, data.get("stop_reason"), ("input_tokens", "output_tokens")
        )
