"""Anthropic messages API (``POST {base_url}/v1/messages``)."""

from __future__ import annotations

import json
import os
from typing import Any

from tiermem._http import HttpClient, require_api_key
from tiermem.errors import InputError
from tiermem.llm.base import ChatMessage, Completion, HttpChatModel, usage_from

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024


class AnthropicModel(HttpChatModel):
    """A Claude model. Reads ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` when not given.

    Messages in OpenAI format are converted: system messages become the ``system``
    field, assistant tool calls become ``tool_use`` blocks and tool messages become
    ``tool_result`` blocks. ``max_tokens`` (required by the API) defaults to 1024.

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
        system, turns = to_anthropic_messages(messages)
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


def to_anthropic_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """Split OpenAI-format messages into Anthropic's ``system`` text and ``messages`` list."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role in ("system", "developer"):
            system.append(_text(message.get("content")))
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": _text(message.get("content")),
            }
            turns.append({"role": "user", "content": [block]})
        elif role == "assistant" and message.get("tool_calls"):
            turns.append({"role": "assistant", "content": _assistant_blocks(message)})
        else:
            turns.append({"role": role, "content": _content(message.get("content"))})
    if not turns:
        raise InputError("messages", "holds only system messages", "add at least one user message")
    return "\n\n".join(s for s in system if s), turns


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _content(content: Any) -> str | list[dict[str, Any]]:
    """OpenAI content (text or parts) as Anthropic content (text or blocks)."""
    if not isinstance(content, list):
        return _text(content)
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "image_url":
            blocks.append(_image_block(str((part.get("image_url") or {}).get("url", ""))))
        else:
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
    return blocks


def _image_block(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _assistant_blocks(message: ChatMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if _text(message.get("content")):
        blocks.append({"type": "text", "text": _text(message.get("content"))})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"raw": function.get("arguments")}
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id", "")),
                "name": str(function.get("name", "")),
                "input": arguments,
            }
        )
    return blocks
