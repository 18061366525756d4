"""What the framework adapters share: checked arguments and a session's message history.

The chat-history adapters (LangChain, OpenAI Agents, LlamaIndex) need a session's messages
back in order and in full. Every read and write of that history goes through the four
functions here (:func:`append`, :func:`read`, :func:`remove`, :func:`clear`), which use
the store's transcript through ``Memory``: every message is kept whole (tool calls, ids,
metadata) in the order added, a line said twice is there twice, and every process sharing
the store reads the same history.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tiermem.errors import InputError, InvalidTypeError, MissingUserError
from tiermem.messages import Message

_T = TypeVar("_T")


def check_id(value: Any, field: str) -> str:
    """A non-empty string id (user_id, session_id), else a typed error naming ``field``."""
    if not isinstance(value, str):
        if value is None and field == "user_id":
            raise MissingUserError(field, "is required", "every memory belongs to one user")
        raise InvalidTypeError(field, f"expected a non-empty str, got {type(value).__name__}")
    if not value.strip():
        error = MissingUserError if field == "user_id" else InputError
        raise error(field, "is empty", "pass a non-empty string")
    return value


def check_list(value: Any, field: str) -> list[Any]:
    """A list or tuple of items (not a str, a dict or one item), else a typed error."""
    if not isinstance(value, (list, tuple)):
        raise InvalidTypeError(
            field,
            f"expected a list, got {type(value).__name__}",
            "wrap a single item in a list",
        )
    return list(value)


def json_copy(value: Any, field: str) -> Any:
    """A JSON round trip of ``value``: a deep copy that is known to serialize."""
    try:
        return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError(field, f"is not JSON-serializable: {exc}") from None


@dataclass(frozen=True)
class Entry:
    """One message of a session's history."""

    message: Message


def append(memory: Any, user_id: str, session_id: str | None, messages: Sequence[Message]) -> None:
    """Add ``messages`` to the session, in order, in one transaction."""
    memory.add_messages(list(messages), user_id, session_id)


def read(memory: Any, user_id: str, session_id: str) -> list[Entry]:
    """The session's messages, oldest first, whole."""
    return [Entry(m) for m in memory.history(user_id, session_id)]


def remove(memory: Any, user_id: str, session_id: str, entries: Sequence[Entry]) -> None:
    """Delete these messages of the session."""
    memory.forget_messages(user_id, [e.message.message_id for e in entries])


def clear(memory: Any, user_id: str, session_id: str) -> int:
    """Delete every message of the session and its summary; how many messages went."""
    return int(memory.forget_session(user_id, session_id))


async def in_thread(function: Callable[..., _T], *args: Any) -> _T:
    """Run a blocking history call off the event loop."""
    return await asyncio.to_thread(function, *args)
