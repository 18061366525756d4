"""OpenAI-compatible chat completions: OpenAI, vLLM, Ollama, llama.cpp server, LM Studio."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from tiermem._http import HttpClient, require_api_key
from tiermem.llm.base import ChatMessage, Completion, HttpChatModel, usage_from

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
        timeout: seconds per attempt.
        max_retries: retries on 429 / 5xx / timeouts / connection errors.
        backoff: base delay of the exponential backoff, in seconds.
        **options: default request fields (``temperature``, ``max_tokens``, ...).
    """

    provider = "openai"

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        **options: Any,
    ) -> None:
        base = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._key_required = urlparse(base).hostname == urlparse(DEFAULT_BASE_URL).hostname
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        for env, header in (
            ("OPENAI_ORG_ID", "OpenAI-Organization"),
            ("OPENAI_PROJECT_ID", "OpenAI-Project"),
        ):
            if os.environ.get(env):
                headers[header] = os.environ[env]
        http = HttpClient(
            base,
            headers,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            provider=self.provider,
            auth_hint="check OPENAI_API_KEY or api_key=",
        )
        super().__init__(model, http, options)
        self._has_key = bool(key)

    def _request(
        self, messages: list[ChatMessage], options: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        if self._key_required and not self._has_key:
            require_api_key(None, "OPENAI_API_KEY", self.provider)
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
        return Completion(
            text=content or "",
            usage=usage_from(data, "prompt_tokens", "completion_tokens"),
            model=str(data.get("model") or self.model),
            finish_reason=choices[0].get("finish_reason"),
            raw=data,
        )
