"""What working memory holds and accepts: its items and stats, and the checks an item
passes before it is embedded."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tiermem.errors import (
    ContentTooLargeError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    SerializationError,
)

ITEM_OVERHEAD_BYTES = 700
"""Python-side bytes per item beyond vector, content and metadata JSON (measured by
benchmarks/working.py with tracemalloc); counted against ``max_memory_mb``."""

RESERVED_KEYS = ("user_id", "session_id", "source", "timestamp")


@dataclass(frozen=True)
class WorkingItem:
    """One item of working memory, as returned by :meth:`WorkingMemory.search`.

    ``similarity`` is the cosine similarity to the query; ``score`` is what results are
    ranked by: the similarity, blended with recency when ``recency_bias`` > 0.
    ``metadata`` holds the caller's keys plus user_id, session_id, source, timestamp.
    """

    id: int
    content: str
    metadata: dict[str, Any]
    timestamp: float
    user_id: str | None = None
    session_id: str | None = None
    source: str | None = None
    score: float = 0.0
    similarity: float = 0.0


@dataclass(frozen=True)
class WorkingStats:
    """Counters of a WorkingMemory (or of one user's share of it)."""

    items: int
    users: int
    size_mb: float
    max_memory_mb: float
    dimension: int
    evicted: int
    cleanups: int
    model_id: str | None


@dataclass
class Record:
    item: WorkingItem
    nbytes: int


@dataclass
class PendingItem:
    """A validated item waiting for its vector."""

    content: str
    metadata: dict[str, Any]
    user_id: str | None
    session_id: str | None
    source: str | None
    timestamp: float
    nbytes: int = 0


def copy_item(item: WorkingItem, score: float = 0.0, similarity: float = 0.0) -> WorkingItem:
    """A copy the caller may mutate without touching the stored metadata."""
    return replace(item, metadata=dict(item.metadata), score=score, similarity=similarity)


def check_positive(name: str, value: object, *, integer: bool = False) -> None:
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an int" if integer else "a number"
        raise InvalidTypeError(name, f"expected {kind}, got {type(value).__name__}")
    number = float(value)  # type: ignore[arg-type]  # int or float, checked above
    if not (number > 0 and math.isfinite(number)):
        raise InvalidSizeError(name, f"must be a finite number > 0, got {value}")


def check_content(content: object, name: str) -> str:
    if not isinstance(content, str):
        raise InvalidTypeError(name, f"expected str, got {type(content).__name__}")
    if not content.strip():
        raise InputError(name, "is empty or whitespace", "pass non-empty text")
    return content


def check_id(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidTypeError(name, f"expected a str, got {type(value).__name__}")
    if not value.strip():
        raise InputError(name, "is empty", f"pass a non-empty {name}")
    return value


def resolve_field(meta: Mapping[str, Any], key: str, value: str | None) -> str | None:
    """The field ``key`` from its argument or from metadata; both given must agree."""
    in_meta = meta.get(key)
    if value is not None and in_meta is not None and in_meta != value:
        raise InputError(key, f"{value!r} conflicts with metadata[{key!r}]={in_meta!r}")
    chosen = value if value is not None else in_meta
    return None if chosen is None else check_id(chosen, key)


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidTypeError("metadata", f"expected a dict, got {type(metadata).__name__}")
    meta = dict(metadata)
    for key in meta:
        if not isinstance(key, str):
            raise InvalidTypeError("metadata", f"keys must be str, got {type(key).__name__}")
    try:
        json.dumps(meta, default=json_default)
    except (TypeError, ValueError) as exc:
        raise SerializationError("metadata", f"is not JSON-serializable: {exc}") from exc
    return meta


def json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def check_timestamp(value: object) -> float:
    if value is None:
        return time.time()
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidTypeError("timestamp", "expected epoch seconds or a datetime")
    return float(value)


def pending_item(
    text: str,
    meta: dict[str, Any],
    user: str | None,
    session_id: str | None,
    source: str | None,
    timestamp: float | datetime | None,
    dimension: int,
    max_memory_mb: float,
) -> PendingItem:
    """An item with its fields resolved from the arguments and ``meta``, and its size;
    raises when the item alone exceeds ``max_memory_mb``."""
    session = resolve_field(meta, "session_id", session_id)
    origin = resolve_field(meta, "source", source)
    stamp = check_timestamp(timestamp if timestamp is not None else meta.get("timestamp"))
    meta.update(user_id=user, session_id=session, source=origin, timestamp=stamp)
    pending = PendingItem(text, meta, user, session, origin, stamp)
    pending.nbytes = (
        dimension * 4
        + len(text.encode("utf-8"))
        + len(json.dumps(meta, default=json_default))
        + ITEM_OVERHEAD_BYTES
    )
    if pending.nbytes > max_memory_mb * 1024 * 1024:
        raise ContentTooLargeError(
            "content",
            f"item of {pending.nbytes} bytes exceeds max_memory_mb={max_memory_mb}",
            "raise max_memory_mb or store it in long-term memory",
        )
    return pending


def check_search(k: int, filter_metadata: Mapping[str, Any] | None, recency_bias: float) -> None:
    """Check a search's ``k``, ``filter_metadata`` and ``recency_bias``."""
    check_positive("k", k, integer=True)
    if filter_metadata is not None and not isinstance(filter_metadata, Mapping):
        raise InvalidTypeError(
            "filter_metadata", f"expected a dict, got {type(filter_metadata).__name__}"
        )
    if isinstance(recency_bias, bool) or not isinstance(recency_bias, (int, float)):
        raise InvalidTypeError("recency_bias", "expected a float between 0 and 1")
    if not 0.0 <= recency_bias <= 1.0:
        raise InvalidSizeError("recency_bias", f"must be in [0, 1], got {recency_bias}")
