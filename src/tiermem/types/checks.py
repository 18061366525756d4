"""What the contract accepts: the checks of its arguments, shared by ``Memory``, the
stores and the clients, so bad input is refused the same way on every face, before
anything is sent or stored.

Each ``check_*`` returns the value in its stored form or raises a typed error from
:mod:`tiermem.errors` naming the field and the fix; :func:`build_message` and
:func:`build_messages` make the messages ``add`` and ``add_messages`` take.
"""

from __future__ import annotations

import json
import math
import threading
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, cast

from tiermem.errors import (
    ContentTooLargeError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
    shown,
)
from tiermem.messages import Message, check_fields
from tiermem.types.records import MEMORY_TYPES

#: Largest ``content`` of a memory accepted, in characters (about 250 pages of text).
MAX_CONTENT_CHARS = 1_000_000
#: Longest ``user_id``, ``agent_id`` and ``session_id`` (the seed's VARCHAR(255)).
MAX_ID_CHARS = 255
#: Largest ``limit`` of one search or list call.
MAX_LIMIT = 10_000
#: Largest ``max_tokens`` of a context: far beyond any model's window, and what the
#: planner's arithmetic (shares of the budget, as floats) holds exactly.
MAX_CONTEXT_TOKENS = 100_000_000


def check_user_id(user_id: object, name: str = "user_id") -> str:
    """Return ``user_id`` if it is a usable non-blank string, else raise a typed error."""
    if user_id is None or (isinstance(user_id, str) and not user_id.strip()):
        raise MissingUserError(name, "is required", "pass the id of the user the memory belongs to")
    return check_text_id(user_id, name)  # type: ignore[return-value]


def check_text_id(value: object, name: str) -> str | None:
    """Validate an optional short identifier (agent_id, session_id)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidTypeError(name, f"must be a str, got {type(value).__name__}")
    if len(value) > MAX_ID_CHARS or "\x00" in value:
        raise InputError(name, f"must be at most {MAX_ID_CHARS} characters without NUL")
    check_encodable(value, name)
    return value


def check_encodable(text: str, name: str) -> str:
    """Text every engine can store: UTF-8 encodable (no lone surrogate such as ``\\ud800``)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(
                name,
                f"holds {text[exc.start]!r} at position {exc.start}, which is not valid Unicode "
                "(a lone surrogate)",
                "decode the text with errors='replace' or remove the character",
            ) from None
    return text


def check_uuid(value: object, name: str = "memory_id") -> uuid.UUID:
    """Accept a UUID or its string form."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise InvalidTypeError(name, f"must be a str or UUID, got {type(value).__name__}")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InputError(name, f"{value!r} is not a UUID", "use the id returned by add()") from None


def check_uuids(values: Iterable[object], name: str = "memory_id") -> tuple[uuid.UUID, ...]:
    """Every value as a UUID (see :func:`check_uuid`)."""
    return tuple(check_uuid(v, name) for v in values)


def check_content(
    content: object,
    name: str = "content",
    max_chars: int = MAX_CONTENT_CHARS,
    hint: str = "split it or summarize it first",
) -> str:
    """Non-empty text of at most ``max_chars`` characters, without NUL characters."""
    if not isinstance(content, str):
        raise InvalidTypeError(name, f"must be a str, got {type(content).__name__}")
    if not content.strip():
        raise InputError(name, "is empty")
    if len(content) > max_chars:
        raise ContentTooLargeError(
            name, f"has {len(content)} characters, the maximum is {max_chars}", hint
        )
    if "\x00" in content:
        raise InputError(name, "contains a NUL character")
    return check_encodable(content, name)


def check_memory_type(value: object, name: str = "memory_type") -> str:
    if value not in MEMORY_TYPES:
        raise InputError(name, f"{value!r} is not a memory type", f"use one of {MEMORY_TYPES}")
    return str(value)


def check_importance(value: object, name: str = "importance") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(name, f"must be a number, got {type(value).__name__}")
    if isinstance(value, int) and not -1 <= value <= 1:  # an int past float's range too
        raise InvalidSizeError(name, f"{shown(value)} is outside [0, 1]")
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidSizeError(name, f"{value} is outside [0, 1]")
    return float(value)


def check_metadata(value: object, name: str = "metadata") -> dict[str, Any]:
    """A JSON-serializable dict with string keys."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidTypeError(name, f"must be a dict, got {type(value).__name__}")
    try:
        text = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InputError(
            name,
            f"is not JSON-serializable: {exc}",
            "use str keys and finite JSON values (str, number, bool, None, list, dict)",
        ) from None
    if "\\u0000" in text or "\x00" in text:
        raise InputError(name, "contains a NUL character")
    check_encodable(text, name)
    return cast(dict[str, Any], json.loads(text))


#: The times every engine stores and Python reads back (epoch seconds as a double).
MIN_TIME = datetime(1000, 1, 1, tzinfo=timezone.utc)
MAX_TIME = datetime(9999, 1, 1, tzinfo=timezone.utc)


def check_timestamp(value: object, name: str = "timestamp") -> datetime:
    """An aware datetime within :data:`MIN_TIME` .. :data:`MAX_TIME` (naive means UTC)."""
    stamp = check_aware(value, name)
    assert stamp is not None
    if not MIN_TIME <= stamp < MAX_TIME:
        raise InvalidSizeError(
            name,
            f"{stamp.isoformat()} is outside the range stored ({MIN_TIME.year} to "
            f"{MAX_TIME.year - 1})",
            "pass the time the message was said",
        )
    return stamp


def check_aware(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidTypeError(name, f"must be a datetime, got {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def check_limit(value: object, name: str = "limit", minimum: int = 1) -> int:
    """An int in ``[minimum, MAX_LIMIT]`` (a bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, f"must be an int, got {type(value).__name__}")
    if not minimum <= value <= MAX_LIMIT:
        raise InvalidSizeError(name, f"{shown(value)} is outside [{minimum}, {MAX_LIMIT}]")
    return value


def check_max_tokens(value: object, name: str = "max_tokens") -> int | None:
    """A context's token budget: None (the configured one) or an int in
    ``[1, MAX_CONTEXT_TOKENS]``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, f"must be an int, got {type(value).__name__}")
    if value < 1:
        raise InvalidSizeError(name, f"must be an int >= 1, got {shown(value)}")
    if value > MAX_CONTEXT_TOKENS:
        raise InvalidSizeError(
            name,
            f"{shown(value)} is over {MAX_CONTEXT_TOKENS:,}, the most a context may take",
            "pass the model's context budget, e.g. 2000",
        )
    return value


def check_timeout(timeout: object, name: str = "timeout") -> float | None:
    """Seconds to wait: None (no limit) for None or a time past what a thread can wait
    (infinity included); a negative time or NaN is refused."""
    if not isinstance(timeout, (int, float, type(None))) or isinstance(timeout, bool):
        raise InvalidTypeError(name, f"must be seconds or None, got {type(timeout).__name__}")
    if timeout is None or (isinstance(timeout, int) and timeout > threading.TIMEOUT_MAX):
        return None
    if math.isnan(timeout) or timeout < 0:
        shown_time = shown(timeout) if isinstance(timeout, int) else repr(timeout)
        raise InvalidSizeError(name, f"must be seconds >= 0 or None, got {shown_time}")
    return None if timeout > threading.TIMEOUT_MAX else float(timeout)


def check_flag(value: object, name: str) -> bool:
    """A bool (1, 0 or "no" are refused: each would read as another answer somewhere)."""
    if not isinstance(value, bool):
        raise InvalidTypeError(name, f"must be a bool, got {type(value).__name__}")
    return value


def build_message(
    role: Any,
    content: Any,
    user_id: str,
    session_id: str | None,
    timestamp: Any,
    metadata: Any,
    fields: Mapping[str, Any],
    name: str = "message",
) -> Message:
    """A :class:`Message` of the user's session (errors named after ``name``)."""
    check_user_id(user_id)
    check_text_id(session_id, "session_id")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidTypeError("metadata", f"expected a dict, got {type(metadata).__name__}")
    check_fields(fields, name)
    meta = {**(metadata or {}), "user_id": user_id}
    if session_id is not None:
        meta["session_id"] = session_id
    extra = dict(fields)
    if timestamp is not None:
        extra["timestamp"] = timestamp
    try:
        return Message(role, content, metadata=meta, **extra)
    except InputError as exc:
        if name == "message" or exc.field.startswith(name):
            raise
        raise exc.relabel(f"{name}.{exc.field}") from None


def build_messages(
    items: Iterable[Message | Mapping[str, Any]], user_id: str, session_id: str | None
) -> list[Message]:
    """``add_messages``' messages, validated (Message objects as they are)."""
    check_user_id(user_id)
    check_list(items, "messages", "a list of messages", "wrap a single message in a list")
    batch: list[Message] = []
    for i, raw in enumerate(items):
        if isinstance(raw, Message):
            batch.append(raw)
        elif isinstance(raw, Mapping):
            data = dict(raw)
            batch.append(
                build_message(
                    data.pop("role", None),
                    data.pop("content", None),
                    user_id,
                    session_id,
                    data.pop("timestamp", None),
                    data.pop("metadata", None),
                    data,
                    f"messages[{i}]",
                )
            )
        else:
            raise InvalidTypeError(f"messages[{i}]", "expected a Message or a message dict")
    if not batch:
        raise InputError("messages", "is empty", "pass at least one message")
    return batch


def check_list(value: Any, field: str, expected: str, fix: str) -> None:
    """Refuse where a list is expected a value that is not iterable, or is one item (a
    str, bytes, a dict or a Message)."""
    if isinstance(value, (str, bytes, Mapping, Message)) or not isinstance(value, Iterable):
        raise InvalidTypeError(field, f"expected {expected}, got {type(value).__name__}", fix)


def check_message_id(value: object, name: str = "message_id") -> str:
    """A message's id: a non-empty text id (see :func:`check_text_id`)."""
    if not isinstance(value, str):
        raise InvalidTypeError(
            name, f"must be a str, got {type(value).__name__}", "pass Message.message_id"
        )
    if not value:
        raise InputError(name, "is empty", "pass the id of one of the user's messages")
    check_text_id(value, name)
    return value


def check_message_ids(ids: Any) -> list[str]:
    """Message ids given as one id or an iterable of ids, each a valid text id."""
    if isinstance(ids, str):
        ids = [ids]
    if isinstance(ids, (bytes, Mapping)) or not isinstance(ids, Iterable):
        raise InvalidTypeError("message_ids", f"expected a list of ids, got {type(ids).__name__}")
    found = list(ids)
    for i, message_id in enumerate(found):
        check_text_id(message_id, f"message_ids[{i}]")
    return found


def check_min_score(value: object) -> float:
    """A ``min_score`` a search can take: a number in [0, 1] (a typed error naming it)."""
    return check_importance(value, "min_score")
