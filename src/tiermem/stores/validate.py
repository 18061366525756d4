"""The store's own checks: a message as the transcript keeps it (the one validator of
the write path), a vector, a position, a durability. The checks of the contract's
arguments are :mod:`tiermem.types.checks`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tiermem.errors import (
    ConfigError,
    ContentTooLargeError,
    DimensionMismatchError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    shown,
)
from tiermem.messages import Message
from tiermem.stores.transcript import AppendOp, Entry, message_json
from tiermem.types.checks import (
    check_encodable,
    check_text_id,
    check_timestamp,
    check_user_id,
)

#: Default ceiling of a message's text, in characters (``memory.max_message_chars``):
#: about a 4 MB pasted document.
MAX_MESSAGE_CHARS = 4_000_000
#: The most text any engine stores whole in one transcript row, in characters: the
#: highest ``memory.max_message_chars`` may be, and what an archive's lines may hold
#: (a row keeps the message's JSON and its line, each under the engines' 1 GB per value
#: even at 6 bytes a character, a JSON escape).
MAX_STORED_CHARS = 100_000_000


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
    infinity in metadata or tool calls; ids over
    :data:`~tiermem.types.checks.MAX_ID_CHARS`; a timestamp outside
    :data:`~tiermem.types.checks.MIN_TIME` .. ``MAX_TIME``; data nested too deeply to
    serialize.
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
    """The validated op of :meth:`~tiermem.stores.transcript_api.Transcript.append` (no
    I/O: it can be built anywhere and run later, with other ops, in one
    :meth:`MemoryStore.batch`)."""
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
