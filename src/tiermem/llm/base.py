"""The LLM protocol, its result types, and the shared body of the HTTP chat providers."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

from tiermem.aio.http import HttpClient, require_api_key
from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.errors import InputError, InvalidTypeError, ProviderResponseError
from tiermem.messages import Message
from tiermem.tokens import get_token_counter

ChatMessage = dict[str, Any]
"""One message in OpenAI chat format: ``{"role": ..., "content": ...}`` and optional fields."""

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


@runtime_checkable
class SupportsOpenAI(Protocol):
    """Anything that renders itself as an OpenAI chat message (``tiermem.Message`` does)."""

    def to_openai(self) -> dict[str, Any]: ...


MessagesInput = str | Sequence[Mapping[str, Any] | SupportsOpenAI]
"""What ``complete`` accepts: a prompt, OpenAI-format dicts, or tiermem messages."""


@dataclass(frozen=True)
class Usage:
    """Tokens one call consumed, as the provider reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    """True when the provider reported no usage and tiermem counted the tokens itself."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )


@dataclass(frozen=True)
class Completion:
    """The answer of one ``complete`` call."""

    text: str
    usage: Usage
    model: str
    finish_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@runtime_checkable
class LLM(Protocol):
    """A chat model: ``complete`` / ``acomplete`` turn messages into a :class:`Completion`."""

    model_id: str

    def complete(self, messages: MessagesInput, **options: Any) -> Completion: ...

    async def acomplete(self, messages: MessagesInput, **options: Any) -> Completion: ...


def to_chat_messages(messages: MessagesInput) -> list[ChatMessage]:
    """Normalize a prompt, OpenAI dicts or tiermem messages to a list of OpenAI dicts.

    Raises:
        InvalidTypeError: an item is neither a mapping nor has ``to_openai()``.
        InputError: the list is empty, or an item lacks a known ``role``.
    """
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if not isinstance(messages, Sequence):
        raise InvalidTypeError(
            "messages",
            f"expected a str or a list of messages, got {type(messages).__name__}",
        )
    if not messages:
        raise InputError("messages", "is empty", "pass at least one message")
    out: list[ChatMessage] = []
    for i, item in enumerate(messages):
        if isinstance(item, SupportsOpenAI):
            message = dict(item.to_openai())
        elif isinstance(item, Mapping):
            message = dict(item)
        else:
            raise InvalidTypeError(
                f"messages[{i}]",
                f"expected a dict or a tiermem Message, got {type(item).__name__}",
            )
        role = message.get("role")
        if role not in _ROLES:
            raise InputError(
                f"messages[{i}].role",
                f"{role!r} is not a chat role",
                f"use one of {sorted(_ROLES)}",
            )
        out.append(message)
    return out


class HttpChatModel:
    """Shared body of HTTP chat providers: the connection, options, usage accounting,
    ``generate``.

    A subclass names its provider in the class attributes below, builds the request
    (:meth:`_request`) and its headers (:meth:`_headers`), and reads the answer
    (:meth:`_parse`).

    Args:
        model: the model name; default :attr:`default_model`.
        api_key: default the variable :attr:`key_env` names.
        base_url: default the variable :attr:`base_url_env` names, else
            :attr:`default_base_url`.
        timeout: seconds per attempt.
        max_retries: retries on 429 / 5xx / timeouts / connection errors.
        backoff: base delay of the exponential backoff, in seconds.
        **options: default request fields (``temperature``, ``max_tokens``, ...).
    """

    provider = ""
    default_model = ""
    default_base_url = ""
    base_url_env = ""
    """The environment variable read for ``base_url`` when none is given."""
    key_env = ""
    """The environment variable read for the API key when none is given, named in
    authentication errors."""
    keyless_elsewhere = False
    """Whether a ``base_url`` on another host than :attr:`default_base_url` (a local
    server) may run without a key."""

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        **options: Any,
    ) -> None:
        base = base_url or os.environ.get(self.base_url_env) or self.default_base_url
        key = api_key if api_key is not None else os.environ.get(self.key_env)
        self._http = HttpClient(
            base,
            self._headers(key),
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            provider=self.provider,
            auth_hint=f"check {self.key_env} or api_key=",
        )
        self._has_key = bool(key)
        self._key_required = not self.keyless_elsewhere or (
            urlparse(base).hostname == urlparse(self.default_base_url).hostname
        )
        model = self.default_model if model is None else model
        if not isinstance(model, str) or not model.strip():
            raise InputError("model", f"{model!r} is not a model name", "e.g. 'gpt-4o-mini'")
        _check_options(options)
        self.model = model
        self.model_id = f"{self.provider}/{model}"
        self.options = options
        self._usage_lock = threading.Lock()
        self.total_usage = Usage()
        self.calls = 0

    @stepped
    def complete(self, /, messages: MessagesInput, **options: Any) -> Steps[Completion]:
        """Send ``messages`` and return the model's answer with its token usage."""
        return (yield from self._answer(messages, options))

    acomplete = stepped_twin(complete)

    @stepped
    def generate(self, /, prompt: str, **options: Any) -> Steps[str]:
        """Seed-compatible shortcut: one user prompt in, the answer's text out."""
        return (yield from self._answer(_prompt(prompt), options)).text

    agenerate = stepped_twin(generate)

    def _answer(self, messages: MessagesInput, options: dict[str, Any]) -> Steps[Completion]:
        """The answer to ``messages``; its one wait is the request, a (path, body) pair."""
        chat = to_chat_messages(messages)
        request = self._request(chat, self._merged(options))
        return self._account(chat, self._parse((yield request)))

    def _step(self, request: tuple[str, dict[str, Any]], /) -> dict[str, Any]:
        return self._http.post_json(*request)

    async def _astep(self, request: tuple[str, dict[str, Any]], /) -> dict[str, Any]:
        return await self._http.apost_json(*request)

    def close(self) -> None:
        self._http.close()

    async def aclose(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self._http.base_url!r})"

    def _merged(self, options: dict[str, Any]) -> dict[str, Any]:
        _check_options(options)
        return {**self.options, **options}

    def _account(self, messages: list[ChatMessage], completion: Completion) -> Completion:
        """Add the call's usage to the totals, counting it ourselves if the provider did not."""
        if "usage" not in completion.raw:
            completion = replace(completion, usage=_estimate_usage(messages, completion.text))
        with self._usage_lock:
            self.total_usage = self.total_usage + completion.usage
            self.calls += 1
        return completion

    def _headers(self, key: str | None) -> dict[str, str]:
        """The headers of every request, with ``key`` (None: no key was given)."""
        raise NotImplementedError

    def _check_key(self) -> None:
        """Raise :class:`AuthenticationError` naming :attr:`key_env` if the host needs a
        key and none was given."""
        if self._key_required and not self._has_key:
            require_api_key(None, self.key_env, self.provider)

    def _completion(
        self,
        data: dict[str, Any],
        text: str,
        finish_reason: Any,
        usage_keys: tuple[str, str],
    ) -> Completion:
        """The parsed answer; ``usage_keys`` name the prompt and completion token counts."""
        return Completion(
            text=text,
            usage=usage_from(data, *usage_keys),
            model=str(data.get("model") or self.model),
            finish_reason=finish_reason,
            raw=data,
        )

    def _bad_response(self, what: str, data: dict[str, Any]) -> ProviderResponseError:
        return ProviderResponseError(f"{self.provider}: {what} in response: {str(data)[:300]}")

    def _request(
        self, messages: list[ChatMessage], options: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any]) -> Completion:
        raise NotImplementedError


def _estimate_usage(messages: list[ChatMessage], text: str) -> Usage:
    counter = get_token_counter()
    prompt = sum(counter.count_message(Message.from_openai(m)) for m in messages)
    return Usage(prompt, counter.count(text), estimated=True)


def _prompt(prompt: str) -> str:
    if not isinstance(prompt, str):
        raise InvalidTypeError("prompt", f"expected str, got {type(prompt).__name__}")
    return prompt


def _check_options(options: Mapping[str, Any]) -> None:
    for reserved in ("messages", "model"):
        if reserved in options:
            raise InputError(
                reserved, "cannot be passed as an option", "give it to the constructor or call"
            )


def usage_from(data: Mapping[str, Any], prompt_key: str, completion_key: str) -> Usage:
    """Read ``data["usage"]``; absent or non-integer counts become 0."""
    usage = data.get("usage")
    if not isinstance(usage, Mapping):
        return Usage()

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return Usage(count(prompt_key), count(completion_key))
