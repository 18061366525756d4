"""Request bodies: refused above a size limit, and refused when JSON escapes encode text
no store can hold (a lone UTF-16 surrogate such as ``"\\ud800"``).

Both checks run before any route: an oversized body is never read past the limit, and a
message that could never be written is never acknowledged (it would block the writer).
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tiermem.errors import ContentTooLargeError, SerializationError
from tiermem.server.errors import error_response

DEFAULT_MAX_BODY = 4 * 1024 * 1024
"""Bytes of a body besides its messages' text (the rest of a request; any body under it)."""
BYTES_PER_CHAR = 4
"""Bytes a character of text may take in a body: UTF-8's most (JSON's ``\\n``, ``\\"``
take 2)."""


def body_limit(max_message_chars: int) -> int:
    """The largest body a server takes: one message at ``memory.max_message_chars`` in
    any UTF-8 text, and :data:`DEFAULT_MAX_BODY` for the rest (4,000,000 characters:
    about 20 MB). A larger body is refused whole before it is read."""
    return BYTES_PER_CHAR * max_message_chars + DEFAULT_MAX_BODY


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _Refused(Exception):
    def __init__(self, error: Any) -> None:
        self.error = error


def _check_text(body: bytes) -> None:
    """Lone surrogates can only arrive as escapes; parse only bodies that have any."""
    if not _SURROGATE_ESCAPE.search(body):
        return
    try:
        value = json.loads(body)
    except ValueError:
        return  # malformed JSON: the route's parser names the problem
    except RecursionError:
        raise _Refused(_too_deep()) from None
    _walk(value)


def _too_deep() -> SerializationError:
    return SerializationError(
        "body", "is nested too deeply to be parsed", "send JSON nested fewer than 1,000 levels deep"
    )


def _walk(value: Any) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused(
                SerializationError(
                    "body", "contains a lone UTF-16 surrogate", "send valid Unicode text"
                )
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(key)
            _walk(item)
    elif isinstance(value, list):
        for item in value:
            _walk(item)


class BodyGuard:
    """ASGI middleware: reads at most ``max_bytes`` of a body, checks it, replays it."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> ContentTooLargeError:
        return ContentTooLargeError(
            "body",
            f"is larger than the limit of {self.max_bytes} bytes",
            "send fewer messages per request",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await error_response(self._too_large())(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await error_response(self._too_large())(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            _check_text(body)
        except _Refused as refused:
            await error_response(refused.error)(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
