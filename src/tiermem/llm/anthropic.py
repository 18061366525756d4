"""Anthropic messages API (``POST {base_url}/v1/messages``)."""

from __future__ import annotations

import os
from typing import Any

from tiermem._http import HttpClient, require_api_key
from tiermem.errors import InputError
from tiermem.llm.base import ChatMessage, Completion, HttpChatModel, usage_from
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
        timeout, max_retries, backoff: as for :class:`~tiermem.llm.OpenAIModel`.
        **options: default request fields (``temperature``, ``max_tokens``, ...).
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str = "claude-3-5-haiku-latest",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        **options: Any,
    ) -> None:
        base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        http = HttpClient(
            base,
            headers,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            provider=self.provider,
            auth_hint="check ANTHROPIC_API_KEY or api_key=",
        )
        super().__init__(model, http, options)
        self._has_key = bool(key)

    def _request(
        self, messages: list[ChatMessage], options: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        if not self._has_key:
            require_api_key(None, "ANTHROPIC_API_KEY", self.provider)
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
        return Completion(
            text=text,
            usage=usage_from(data, "input_tokens", "output_tokens"),
            model=str(data.get("model") or self.model),
            finish_reason=data.get("stop_reason"),
            raw=data,
        )
