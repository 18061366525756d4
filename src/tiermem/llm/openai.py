"""OpenAI-compatible chat completions: OpenAI, vLLM, Ollama, llama.cpp server, LM Studio."""

from __future__ import annotations

import os
from typing import Any

from tiermem.llm.base import ChatMessage, Completion, HttpChatModel

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIModel(HttpChatModel):
    """A chat model behind ``POST {base_url}/chat/completions``.

    Like the official SDK it reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
    ``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID`` when the arguments are not given.
    A key is required for api.openai.com; local servers (another ``base_url``)
    may run without one.

    Args:
        model: the model name (``"gpt-4o-mini"``, ``"llama3.1:8b"``).
        api_key: bearer token; default ``$OPENAI_API_KEY``.
        base_url: endpoint prefix ending in ``/v1``; default ``$OPENAI_BASE_URL`` or OpenAI.
        timeout, max_retries, backoff, **options: see :class:`~tiermem.llm.HttpChatModel`.
    """

    provider = "openai"
    default_model = "gpt-4o-mini"
    default_base_url = DEFAULT_BASE_URL
    base_url_env = "OPENAI_BASE_URL"
    key_env = "OPENAI_API_KEY"
    keyless_elsewhere = True

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        for env, header in (
            ("OPENAI_ORG_ID", "OpenAI-Organization"),
            ("OPENAI_PROJECT_ID", "OpenAI-Project"),
        ):
            if os.environ.get(env):
                headers[header] = os.environ[env]
        return headers

    def _request(
        self, messages: list[ChatMessage], options: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        self._check_key()
        return "/chat/completions", {"model": self.model, "messages": messages, **options}

    def _parse(self, data: dict[str, Any]) -> Completion:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._bad_response("no choices", data)
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise self._bad_response("no choices[0].message", data)
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise self._bad_response("non-text choices[0].message.content", data)
        return self._completion(
            data,
            content or "",
            choices[0].get("finish_reason"),
            ("prompt_tokens", "completion_tokens"),
        )
