"""The one validator: what a store accepts is what every engine stores and reads back.

Each ``check_*`` returns the value in its stored form or raises a typed error from
:mod:`tiermem.errors` naming the field and the fix; :func:`message_entry` and
:func:`append_op` validate messages for the transcript.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, cast

import numpy as np

from tiermem.errors import (
    ConfigError,
    ContentTooLargeError,
    DimensionMismatchError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
    shown,
)
from tiermem.messages import Message, check_fields
from tiermem.stores.records import MEMORY_TYPES
from tiermem.stores.transcript import AppendOp, Entry, message_json

#: Largest ``content`` of a memory accepted, in characters (about 250 pages of text).
MAX_CONTENT_CHARS = 1_000_000
#: Default ceiling of a message's text, in characters (``memory.max_message_chars``):
#: about a 4 MB pasted document.
MAX_MESSAGE_CHARS = 4_000_000
#: The most text any engine stores whole in one transcript row, in characters: the
#: highest ``memory.max_message_chars`` may be, and what an archive's lines may hold
#: (a row keeps the message's JSON and its line, each under the engines' 1 GB per value
#: even at 6 bytes a character, a JSON escape).
MAX_STORED_CHARS = 100_000_000
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
    import json

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


def message_entry(
    message: Message,
    previous_id: str | None,
    agent_id: str | None,
    name: str = "message",
    max_chars: int = MAX_MESSAGE_CHARS,
) -> Entry:
    """Validate a message for the transcript and index: what this accepts, every engine
    stores and reads back (the one validator of the write path).

    Refused with a typed error naming the field: empty text without tool calls, images or
    data; text over ``max_chars`` (``memory.max_message_chars``; the transcript keeps
    anything up to it whole); NUL characters or lone surrogates anywhere; NaN or
    infinity in metadata or tool calls; ids over :data:`MAX_ID_CHARS`; a timestamp outside
    :data:`MIN_TIME` .. :data:`MAX_TIME`; data nested too deeply to serialize.
    """
    from tiermem.messages import transcript_line

    check_text_id(message.message_id, f"{name}.message_id")
    check_text_id(message.name, f"{name}.name")
    check_text_id(message.tool_call_id, f"{name}.tool_call_id")
    check_timestamp(message.timestamp, f"{name}.timestamp")
    try:
        stored = message_json(message)
        text = message.text
    except RecursionError:
        raise InputError(name, "is nested too deeply to store", "flatten the content") from None
    except (TypeError, ValueError) as exc:
        raise InputError(
            name,
            f"cannot be stored as JSON: {exc}",
            "use str keys and finite JSON values (no NaN or infinity)",
        ) from None
    if "\\u0000" in stored:
        raise InputError(name, "contains a NUL character", "remove it")
    check_encodable(stored, name)
    if not text.strip():
        if not (
            message.tool_calls or message.images or message.structured_data or message.agent_calls
        ):
            if message.content is None:
                raise InvalidTypeError(
                    f"{name}.content",
                    "must be text (a str or a list of parts), got None",
                    "pass the message's text",
                )
            raise InputError(f"{name}.content", "is empty", "add text, or do not add the message")
        line = None
    else:
        if len(text) > max_chars:
            raise too_long(f"{name}.content", len(text), max_chars)
        line = transcript_line(message)
    return Entry(message, stored, line, agent_id, previous_id)


def too_long(field: str, size: int, max_chars: int) -> ContentTooLargeError:
    """The error of a message's text over the ceiling: its field, size, the ceiling and
    the setting that raises it."""
    return ContentTooLargeError(
        field,
        f"has {size:,} characters; the most a message may have is {max_chars:,}",
        f"raise memory.max_message_chars, at most {MAX_STORED_CHARS:,}, or split the text "
        "into several messages",
    )


def append_op(
    user_id: str,
    session_id: str | None,
    messages: Sequence[Message],
    agent_id: str | None = None,
    previous_id: str | None = None,
    max_chars: int = MAX_MESSAGE_CHARS,
) -> AppendOp:
    """The validated op of :meth:`MemoryStore.append` (no I/O: it can be built anywhere
    and run later, with other ops, in one :meth:`MemoryStore.batch`)."""
    check_user_id(user_id)
    check_text_id(session_id, "session_id")
    check_text_id(agent_id, "agent_id")
    entries = []
    for i, message in enumerate(messages):
        name = "message" if len(messages) == 1 else f"messages[{i}]"
        entries.append(message_entry(message, previous_id, agent_id, name, max_chars))
        previous_id = message.message_id
    return AppendOp(user_id, session_id, tuple(entries))


def check_position(value: object, name: str = "after") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, f"must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidSizeError(name, f"{shown(value)} is negative")
    return value


DURABILITY = {"async_commit": "NORMAL", "committed": "NORMAL", "synced": "FULL"}
"""Store durability levels, with SQLite's ``synchronous`` setting for each (docs/stores.md,
"Durability"). SQLite's engine runs in the writing process, so ``async_commit`` is
``committed`` there; on PostgreSQL it is ``synchronous_commit = off``."""


def check_durability(value: object) -> str:
    """SQLite's ``synchronous`` setting for a durability level (see :data:`DURABILITY`)."""
    if value not in DURABILITY:
        raise ConfigError(
            "durability", f"{value!r} is not a store durability", f"use one of {sorted(DURABILITY)}"
        )
    return DURABILITY[str(value)]


def check_vector(value: object, dimension: int, name: str = "embedding") -> np.ndarray:
    """A finite float32 vector of the store's dimension, L2-normalized (cosine storage)."""
    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError(name, "must be a sequence of numbers") from exc
    if vec.ndim != 1 or vec.shape[0] != dimension:
        raise DimensionMismatchError(
            name,
            f"has shape {vec.shape}, the table stores {dimension}-dimensional vectors",
            f"embed with a {dimension}-dimensional model or use a store of dimension={vec.size}",
        )
    if not np.all(np.isfinite(vec)):
        raise InputError(name, "contains NaN or infinity")
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        raise InputError(name, "is the zero vector, which has no direction")
    if abs(norm - 1.0) <= 1e-6:  # already unit length: kept bit for bit (an import)
        return vec
    normalized: np.ndarray = (vec / norm).astype(np.float32)
    return normalized


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


# -- messages as Memory and the clients take them --


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
