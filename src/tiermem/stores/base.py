"""The MemoryStore protocol: records, operations and the derived API every backend shares.

A backend implements two methods, :meth:`MemoryStore.batch` and :meth:`MemoryStore.abatch`,
which run a list of small operation tuples (:class:`AddOp`, :class:`SearchOp`, ...) in one
transaction and return one result per operation. Everything else (``add``, ``search``,
``delete_user`` and their ``a``-prefixed async twins) is derived here, so validation,
embedding of text that comes without a vector and result shaping are written once.
"""

from __future__ import annotations

import builtins
import copy
import math
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar, cast, get_args

import numpy as np

from tiermem.errors import (
    ConfigError,
    ContentTooLargeError,
    DimensionMismatchError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
)
from tiermem.stores import facts
from tiermem.stores import transcript as tr

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder
    from tiermem.messages import Message

MemoryType = Literal["message", "fact", "preference", "context", "summary", "tool"]
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
SearchMode = Literal["vector", "keyword", "hybrid"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)

#: Largest ``content`` accepted, in characters (about 250 pages of text).
MAX_CONTENT_CHARS = 1_000_000
#: Longest ``user_id``, ``agent_id`` and ``session_id`` (the seed's VARCHAR(255)).
MAX_ID_CHARS = 255
#: Largest ``limit`` of one search or list call.
MAX_LIMIT = 10_000
#: Default explicit importance, as in seed 001 (``explicit_importance or 0.5``).
DEFAULT_IMPORTANCE = 0.5

# Importance scoring (seed 001): 0.3 recency + 0.3 access frequency + 0.4 explicit.
RECENCY_HALF_LIFE_DAYS = 30.0
ACCESS_SATURATION = 100


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (every stored timestamp is UTC)."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class MemoryRecord:
    """One long-term memory, as stored in a ``memories_{dim}`` table.

    ``importance`` is the *explicit* importance in [0, 1] given when the memory was
    written; :func:`calculate_importance` combines it with recency and access counts.
    """

    id: uuid.UUID
    user_id: str
    content: str
    memory_type: MemoryType = "fact"
    agent_id: str | None = None
    session_id: str | None = None
    importance: float = DEFAULT_IMPORTANCE
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)
    accessed_at: datetime = field(default_factory=utcnow)
    access_count: int = 0
    content_hash: str = ""
    embedding: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (without the embedding)."""
        return {
            "id": str(self.id),
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "content": self.content,
            "content_hash": self.content_hash,
            "memory_type": self.memory_type,
            "importance": self.importance,
            "metadata": self.metadata,
            "created_at": self.created_at.isoformat(),
            "accessed_at": self.accessed_at.isoformat(),
            "access_count": self.access_count,
        }


@dataclass(frozen=True)
class SearchEvidence:
    """How hybrid search ranked a record: its place in each list it fused.

    ``rrf`` is the reciprocal-rank-fusion value ``sum(1 / (60 + rank))`` the results are
    ordered by; ``vector_rank`` / ``similarity`` its place and cosine similarity in the
    vector list, ``keyword_rank`` / ``keyword_score`` its place and the engine's text
    rank (FTS5 bm25 negated, or ``ts_rank_cd``) in the keyword list; None where the
    record was not in that list.
    """

    rrf: float
    vector_rank: int | None = None
    similarity: float | None = None
    keyword_rank: int | None = None
    keyword_score: float | None = None

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "rrf": self.rrf,
            "vector_rank": self.vector_rank,
            "similarity": self.similarity,
            "keyword_rank": self.keyword_rank,
            "keyword_score": self.keyword_score,
        }


@dataclass(frozen=True)
class SearchResult:
    """A record found by a search, with its score (higher is better).

    ``score`` is the cosine similarity for vector search and the engine's text rank for
    keyword search. For hybrid search it is the relevance in [0, 1]: the fusion value
    as a share of the best possible (1.0: ranked first by both the vector and the keyword
    search; 0.5: first in one, absent from the other), in the order of the fusion;
    ``evidence`` holds the fusion's details (see :meth:`explain`).
    """

    record: MemoryRecord
    score: float
    evidence: SearchEvidence | None = None

    def explain(self) -> str:
        """One line: the score, and for hybrid search the evidence behind it."""
        line = f"score {self.score:.3f}"
        e = self.evidence
        if e is None:
            return line
        vector = "-" if e.vector_rank is None else f"#{e.vector_rank} sim {e.similarity:.3f}"
        keyword = "-" if e.keyword_rank is None else f"#{e.keyword_rank} rank {e.keyword_score:.3f}"
        return f"{line} (rrf {e.rrf:.4f}; vector {vector}; keyword {keyword})"


@dataclass(frozen=True)
class StoreStats:
    """Aggregate figures about one user's memories."""

    count: int
    by_type: dict[str, int]
    oldest: datetime | None
    newest: datetime | None
    total_access_count: int
    mean_importance: float | None


class NewMemory(NamedTuple):
    """A memory to add; ``embedding`` is filled in by the derived ``add`` if missing."""

    content: str
    embedding: np.ndarray | None = None
    memory_type: str = "fact"
    agent_id: str | None = None
    session_id: str | None = None
    importance: float = DEFAULT_IMPORTANCE
    metadata: Mapping[str, Any] | None = None
    created_at: datetime | None = None


class MemoryFilter(NamedTuple):
    """Conditions every returned record meets (besides belonging to the user).

    ``metadata`` matches top-level keys by equality with a JSON scalar value.
    ``created_after`` is inclusive, ``created_before`` exclusive.
    """

    memory_types: tuple[str, ...] | None = None
    session_id: str | None = None
    agent_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    metadata: Mapping[str, str | int | float | bool | None] | None = None


NO_FILTER = MemoryFilter()


class AddOp(NamedTuple):
    """Add memories for a user; duplicates (same content) return the existing id."""

    user_id: str
    memories: tuple[NewMemory, ...]


class GetOp(NamedTuple):
    """Fetch memories by id; counts as an access."""

    user_id: str
    ids: tuple[uuid.UUID, ...]


class SearchOp(NamedTuple):
    """Vector, keyword or hybrid search within one user's memories.

    Every hit counts as an access unless ``count_access`` is False: a caller that uses
    only some hits (the query planner) records those with :class:`AccessOp` instead.
    """

    user_id: str
    mode: str
    vector: np.ndarray | None
    text: str | None
    limit: int = 10
    filter: MemoryFilter = NO_FILTER
    count_access: bool = True


class AccessOp(NamedTuple):
    """Count ``times`` accesses of the user's memories ``ids`` (others' ids are ignored);
    the result is how many memories were counted."""

    user_id: str
    ids: tuple[uuid.UUID, ...]
    times: int = 1


class UpdateOp(NamedTuple):
    """Change fields of one memory; ``None`` leaves a field as it is."""

    user_id: str
    id: uuid.UUID
    content: str | None = None
    embedding: np.ndarray | None = None
    memory_type: str | None = None
    importance: float | None = None
    metadata: Mapping[str, Any] | None = None


class DeleteOp(NamedTuple):
    """Delete memories by id; the result is how many were deleted."""

    user_id: str
    ids: tuple[uuid.UUID, ...]


class DeleteUserOp(NamedTuple):
    """Erase every memory of a user; the result is how many were deleted."""

    user_id: str


class ListOp(NamedTuple):
    """Page through a user's memories, newest first (not counted as an access)."""

    user_id: str
    filter: MemoryFilter = NO_FILTER
    limit: int = 100
    offset: int = 0


class CountOp(NamedTuple):
    """Count a user's memories matching a filter."""

    user_id: str
    filter: MemoryFilter = NO_FILTER


class StatsOp(NamedTuple):
    """Aggregate figures about a user's memories."""

    user_id: str


class ScanOp(NamedTuple):
    """Admin: every record of the table (all users, or ``user_id``'s) with id > ``after``,
    by id, with vectors."""

    after: uuid.UUID | None
    limit: int
    user_id: str | None = None


class ImportOp(NamedTuple):
    """Admin: insert complete records as they are (ids, times, counts); skips existing ids
    and per-user duplicate content. The result is how many were inserted."""

    records: tuple[MemoryRecord, ...]


class ExistingIdsOp(NamedTuple):
    """Admin: which of ``ids`` exist in the table (any user)."""

    ids: tuple[uuid.UUID, ...]


class TableSizeOp(NamedTuple):
    """Admin: how many records the table holds (all users)."""


Op = (
    AddOp
    | GetOp
    | SearchOp
    | AccessOp
    | UpdateOp
    | DeleteOp
    | DeleteUserOp
    | ListOp
    | CountOp
    | StatsOp
    | ScanOp
    | ImportOp
    | ExistingIdsOp
    | TableSizeOp
    | tr.AppendOp
    | tr.RecentOp
    | tr.TranscriptOp
    | tr.SessionsOp
    | tr.UsersOp
    | tr.ClaimOp
    | tr.CompleteOp
    | tr.FailOp
    | tr.ReleaseOp
    | tr.RetryOp
    | tr.WorkStatsOp
    | tr.SummaryOp
    | tr.SummaryDueOp
    | tr.SaveSummaryOp
    | tr.ForgetMessagesOp
    | tr.UnindexedOp
    | tr.GenerationOp
    | tr.RestoreOp
    | facts.DueSessionsOp
    | facts.FactsDueOp
    | facts.SaveFactsOp
    | facts.FactsFailOp
    | facts.FactMarkOp
    | facts.FactVersionsOp
)

_T = TypeVar("_T")


def calculate_importance(
    memory: MemoryRecord,
    *,
    now: datetime | None = None,
    half_life_days: float = RECENCY_HALF_LIFE_DAYS,
    access_saturation: int = ACCESS_SATURATION,
) -> float:
    """Seed 001's importance score, normalized to [0, 1].

    ``0.3 * recency + 0.3 * access_frequency + 0.4 * explicit_importance`` where

    * recency = ``0.5 ** (age_days / half_life_days)`` (1 when new, 0.5 after 30 days),
    * access_frequency = ``log(access_count + 1) / log(access_saturation + 1)`` capped at 1
      (the seed's ``log(access_count + 1)`` scaled so 100 accesses count fully),
    * explicit_importance = the record's ``importance`` (0.5 unless given).

    The weights sum to 1, so the score stays in [0, 1].
    """
    now = now or utcnow()
    age_days = max(0.0, (now - memory.created_at).total_seconds() / 86_400)
    recency = 0.5 ** (age_days / half_life_days)
    frequency = min(1.0, math.log(memory.access_count + 1) / math.log(access_saturation + 1))
    explicit = min(1.0, max(0.0, memory.importance))
    return float(0.3 * recency + 0.3 * frequency + 0.4 * explicit)


RRF_K = 60
"""The fusion's rank offset: each list adds ``1 / (RRF_K + rank)``."""


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[SearchResult]], limit: int, k: int = RRF_K
) -> list[SearchResult]:
    """Fuse a vector and a keyword ranking: each record's fusion value is
    ``sum(1 / (k + rank))`` over the lists it is in, and the results are in that order;
    the score shown is that value over the best possible (first in every list), so it
    reads as a relevance in [0, 1]. ``evidence`` keeps each list's rank and score."""
    fused: dict[uuid.UUID, float] = {}
    records: dict[uuid.UUID, MemoryRecord] = {}
    places: dict[uuid.UUID, list[tuple[int, float] | None]] = {}
    for n, ranking in enumerate(rankings):
        for rank, hit in enumerate(ranking, start=1):
            fused[hit.record.id] = fused.get(hit.record.id, 0.0) + 1.0 / (k + rank)
            records[hit.record.id] = hit.record
            places.setdefault(hit.record.id, [None] * len(rankings))[n] = (rank, hit.score)
    best_possible = len(rankings) / (k + 1)
    best = sorted(fused, key=lambda i: -fused[i])[:limit]
    return [
        SearchResult(records[i], fused[i] / best_possible, _evidence(fused[i], places[i]))
        for i in best
    ]


def _evidence(rrf: float, places: list[tuple[int, float] | None]) -> SearchEvidence:
    """The evidence of one fused record; ``places``: (rank, score) in the vector and the
    keyword list, None where it is absent."""
    vector, keyword = [*places, None, None][:2]
    return SearchEvidence(
        rrf=rrf,
        vector_rank=vector[0] if vector else None,
        similarity=vector[1] if vector else None,
        keyword_rank=keyword[0] if keyword else None,
        keyword_score=keyword[1] if keyword else None,
    )


# --- validation -------------------------------------------------------------------------


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


def check_content(content: object, name: str = "content") -> str:
    """Non-empty text no longer than :data:`MAX_CONTENT_CHARS`, without NUL characters."""
    if not isinstance(content, str):
        raise InvalidTypeError(name, f"must be a str, got {type(content).__name__}")
    if not content.strip():
        raise InputError(name, "is empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise ContentTooLargeError(
            name,
            f"has {len(content)} characters, the maximum is {MAX_CONTENT_CHARS}",
            "split it or summarize it first",
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
    stamp = _aware(value, name)
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
    max_chars: int = MAX_CONTENT_CHARS,
) -> tr.Entry:
    """Validate a message for the transcript and index: what this accepts, every engine
    stores and reads back (the one validator of the write path).

    Refused with a typed error naming the field: empty text without tool calls, images or
    data; a line over ``max_chars``; NUL characters or lone surrogates anywhere; NaN or
    infinity in metadata or tool calls; ids over :data:`MAX_ID_CHARS`; a timestamp outside
    :data:`MIN_TIME` .. :data:`MAX_TIME`; data nested too deeply to serialize.
    """
    from tiermem.messages import transcript_line

    check_text_id(message.message_id, f"{name}.message_id")
    check_text_id(message.name, f"{name}.name")
    check_text_id(message.tool_call_id, f"{name}.tool_call_id")
    check_timestamp(message.timestamp, f"{name}.timestamp")
    try:
        stored = tr.message_json(message)
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
        line = transcript_line(message)
        if len(line) > max_chars:
            raise ContentTooLargeError(
                f"{name}.content",
                f"has {len(line)} characters with its speaker; the most a message can have "
                f"is {max_chars}",
                "split it into several messages",
            )
    return tr.Entry(message, stored, line, agent_id, previous_id)


def append_op(
    user_id: str,
    session_id: str | None,
    messages: Sequence[Message],
    agent_id: str | None = None,
    previous_id: str | None = None,
    max_chars: int = MAX_CONTENT_CHARS,
) -> tr.AppendOp:
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
    return tr.AppendOp(user_id, session_id, tuple(entries))


def index_row(entry: tr.Entry, session_id: str | None, vector: Any) -> NewMemory:
    """The index row of a transcript message: memory_type ``message`` (``tool`` for tool
    results), its time, and metadata linking it to the message and the one before it."""
    assert entry.line is not None
    message = entry.message
    metadata = {
        "message_id": message.message_id,
        "role": message.role,
        **{k: v for k, v in message.metadata.items() if _is_scalar(v)},
    }
    if message.name:
        metadata["name"] = message.name
    if entry.previous_id:
        metadata["previous_id"] = entry.previous_id
    return NewMemory(
        content=entry.line,
        embedding=vector,
        memory_type="tool" if message.role == "tool" else "message",
        agent_id=entry.agent_id,
        session_id=session_id,
        importance=0.3,
        metadata=metadata,
        created_at=message.timestamp,
    )


def _check_position(value: object, name: str = "after") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, f"must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidSizeError(name, f"{value} is negative")
    return value


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


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


def _aware(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidTypeError(name, f"must be a datetime, got {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def check_limit(value: object, name: str = "limit", minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, f"must be an int, got {type(value).__name__}")
    if not minimum <= value <= MAX_LIMIT:
        raise InvalidSizeError(name, f"{value} is outside [{minimum}, {MAX_LIMIT}]")
    return value


SEARCH_FILTERS = frozenset(
    {"memory_type", "session_id", "agent_id", "created_after", "created_before", "metadata"}
)
"""The keyword filters of search, list and count."""


def make_filter(
    memory_type: str | Iterable[str] | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> MemoryFilter:
    """Validate the keyword filters of the derived methods into a :class:`MemoryFilter`."""
    types: tuple[str, ...] | None = None
    if memory_type is not None:
        if not isinstance(memory_type, (str, list, tuple, set, frozenset)):
            raise InvalidTypeError(
                "memory_type", f"must be a str or a list of str, got {type(memory_type).__name__}"
            )
        raw = (memory_type,) if isinstance(memory_type, str) else tuple(memory_type)
        types = tuple(check_memory_type(t) for t in raw)
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise InvalidTypeError("metadata", f"must be a dict, got {type(metadata).__name__}")
        for key, val in metadata.items():
            if not isinstance(key, str) or not key:
                raise InvalidTypeError("metadata", f"filter key {key!r} must be a non-empty str")
            if val is not None and not isinstance(val, (str, int, float, bool)):
                raise InvalidTypeError(
                    f"metadata.{key}", "filter values must be str, int, float, bool or None"
                )
            if isinstance(val, str) and "\x00" in val:
                raise InputError(f"metadata.{key}", "contains a NUL character")
    return MemoryFilter(
        memory_types=types,
        session_id=check_text_id(session_id, "session_id"),
        agent_id=check_text_id(agent_id, "agent_id"),
        created_after=_aware(created_after, "created_after"),
        created_before=_aware(created_before, "created_before"),
        metadata=dict(metadata) if metadata else None,
    )


# --- the protocol -------------------------------------------------------------------------


class MemoryStore(ABC):
    """Long-term memory of many users in one ``memories_{dimension}`` table.

    Subclasses implement :meth:`batch` and :meth:`abatch`; every other method is derived.
    Every per-user method requires ``user_id`` and only ever sees that user's records.

    Args:
        dimension: width of the stored vectors; defaults to ``embedder.dimension``.
        embedder: optional; embeds content or queries given without a vector.
    """

    def __init__(self, dimension: int | None = None, embedder: Embedder | None = None) -> None:
        if dimension is None:
            if embedder is None:
                raise InputError("dimension", "is required", "pass dimension= or embedder=")
            dimension = embedder.dimension
        if (
            isinstance(dimension, bool)
            or not isinstance(dimension, int)
            or not 1 <= dimension <= 16_000
        ):
            raise InvalidSizeError("dimension", f"{dimension!r} is not in [1, 16000]")
        if embedder is not None and embedder.dimension != dimension:
            raise DimensionMismatchError(
                "embedder",
                f"{embedder.model_id} makes {embedder.dimension}-dimensional vectors, "
                f"the store holds {dimension}",
                "use a store of the embedder's dimension",
            )
        self.dimension = dimension
        self.embedder = embedder
        self.table = f"memories_{dimension}"

    # -- the core a backend implements --

    @abstractmethod
    def batch(self, ops: Iterable[Op]) -> list[Any]:
        """Run ``ops`` in one transaction; one result per op, in order.

        If any op fails, nothing of the batch is kept and the error is raised.
        """

    @abstractmethod
    async def abatch(self, ops: Iterable[Op]) -> list[Any]:
        """Async twin of :meth:`batch`."""

    @abstractmethod
    def close(self) -> None:
        """Release connections and caches; the store is unusable afterwards."""

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- op builders shared by the sync and async methods --

    def _new_memories(
        self,
        user_id: str,
        contents: Sequence[str | NewMemory],
        embeddings: Sequence[Any] | np.ndarray | None,
        defaults: dict[str, Any],
    ) -> tuple[list[NewMemory], list[int]]:
        """The validated memories of an add, and the positions of those to embed."""
        check_user_id(user_id)
        items = []
        for i, item in enumerate(contents):
            mem = item if isinstance(item, NewMemory) else NewMemory(content=item, **defaults)
            name = f"memories[{i}]"
            vec = mem.embedding
            if embeddings is not None:
                vec = embeddings[i]
            items.append(
                NewMemory(
                    content=check_content(mem.content, f"{name}.content"),
                    embedding=None
                    if vec is None
                    else check_vector(vec, self.dimension, f"{name}.embedding"),
                    memory_type=check_memory_type(mem.memory_type, f"{name}.memory_type"),
                    agent_id=check_text_id(mem.agent_id, f"{name}.agent_id"),
                    session_id=check_text_id(mem.session_id, f"{name}.session_id"),
                    importance=check_importance(mem.importance, f"{name}.importance"),
                    metadata=check_metadata(mem.metadata, f"{name}.metadata"),
                    created_at=_aware(mem.created_at, f"{name}.created_at"),
                )
            )
        if embeddings is not None and len(embeddings) != len(contents):
            raise InputError(
                "embeddings", f"has {len(embeddings)} rows for {len(contents)} contents"
            )
        return items, self._needs_embedding(items)

    def _needs_embedding(self, items: Sequence[NewMemory]) -> list[int]:
        missing = [i for i, m in enumerate(items) if m.embedding is None]
        if missing and self.embedder is None:
            raise InputError(
                "embedding",
                "is missing and the store has no embedder",
                "pass embeddings or embedder=",
            )
        return missing

    def _fill(
        self, items: list[NewMemory], missing: list[int], vectors: np.ndarray
    ) -> list[NewMemory]:
        for row, i in enumerate(missing):
            items[i] = items[i]._replace(embedding=check_vector(vectors[row], self.dimension))
        return items

    def _search_op(
        self,
        user_id: str,
        query: str | None,
        vector: Any,
        mode: str,
        limit: int,
        flt: MemoryFilter,
        count_access: bool,
    ) -> SearchOp:
        check_user_id(user_id)
        if mode not in SEARCH_MODES:
            raise InputError("mode", f"{mode!r} is not a search mode", f"use one of {SEARCH_MODES}")
        if query is not None and not isinstance(query, str):
            raise InvalidTypeError("query", f"must be a str, got {type(query).__name__}")
        if mode in ("keyword", "hybrid") and not (query or "").strip():
            raise InputError("query", f"is required for {mode} search")
        vec = None if vector is None else check_vector(vector, self.dimension, "vector")
        if mode in ("vector", "hybrid") and vec is None:
            if query is None:
                raise InputError("vector", "vector search needs a vector or a query text")
            if self.embedder is None:
                raise InputError(
                    "vector", "is missing and the store has no embedder", "pass vector="
                )
        return SearchOp(user_id, mode, vec, query, check_limit(limit), flt, bool(count_access))

    def _update_op(self, user_id: str, memory_id: Any, fields: dict[str, Any]) -> UpdateOp:
        unknown = set(fields) - {"content", "embedding", "memory_type", "importance", "metadata"}
        if unknown:
            raise InputError(sorted(unknown)[0], "cannot be updated")
        check_user_id(user_id)
        content = fields.get("content")
        embedding = fields.get("embedding")
        op = UpdateOp(
            user_id=user_id,
            id=check_uuid(memory_id),
            content=None if content is None else check_content(content),
            embedding=None if embedding is None else check_vector(embedding, self.dimension),
            memory_type=None
            if fields.get("memory_type") is None
            else check_memory_type(fields["memory_type"]),
            importance=None
            if fields.get("importance") is None
            else check_importance(fields["importance"]),
            metadata=None if fields.get("metadata") is None else check_metadata(fields["metadata"]),
        )
        if op.content is not None and op.embedding is None and self.embedder is None:
            raise InputError(
                "embedding",
                "content changed but no embedding was given",
                "pass embedding= or embedder=",
            )
        return op

    def _list_op(self, user_id: str, limit: int, offset: int, filters: dict[str, Any]) -> ListOp:
        return ListOp(
            check_user_id(user_id),
            make_filter(**filters),
            check_limit(limit),
            check_limit(offset, "offset", 0),
        )

    # -- derived sync API --

    def add(
        self,
        user_id: str,
        content: str,
        *,
        embedding: Any = None,
        memory_type: str = "fact",
        agent_id: str | None = None,
        session_id: str | None = None,
        importance: float = DEFAULT_IMPORTANCE,
        metadata: Mapping[str, Any] | None = None,
    ) -> uuid.UUID:
        """Store one memory and return its id (the existing id if the content is known)."""
        mem = NewMemory(content, embedding, memory_type, agent_id, session_id, importance, metadata)
        return self.add_many(user_id, [mem])[0]

    def add_many(
        self,
        user_id: str,
        contents: Sequence[str | NewMemory],
        *,
        embeddings: Sequence[Any] | np.ndarray | None = None,
        **defaults: Any,
    ) -> list[uuid.UUID]:
        """Store many memories in one transaction; ids in input order.

        Args:
            user_id: owner of every memory.
            contents: texts, or :class:`NewMemory` tuples for per-item fields.
            embeddings: optional vectors, one per content; missing ones are embedded.
            **defaults: fields of :class:`NewMemory` applied to plain-text contents.
        """
        items, missing = self._new_memories(user_id, contents, embeddings, defaults)
        if missing:
            assert self.embedder is not None
            items = self._fill(
                items, missing, self.embedder.embed([items[i].content for i in missing])
            )
        return cast(list[uuid.UUID], self.batch([AddOp(user_id, tuple(items))])[0])

    def get(self, user_id: str, memory_id: uuid.UUID | str) -> MemoryRecord | None:
        """The memory with this id if it belongs to ``user_id``, else ``None``."""
        found = self.get_many(user_id, [memory_id])
        return found[0] if found else None

    def get_many(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> list[MemoryRecord]:
        """The user's memories among ``memory_ids`` (unknown ids are skipped)."""
        op = GetOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(list[MemoryRecord], self.batch([op])[0])

    def record_access(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Count one access of each of the user's memories ``memory_ids``; how many counted.

        For callers that search with ``count_access=False`` and use only some hits.
        """
        op = AccessOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(int, self.batch([op])[0])

    def search(
        self,
        user_id: str,
        query: str | None = None,
        *,
        vector: Any = None,
        mode: SearchMode = "vector",
        limit: int = 10,
        count_access: bool = True,
        **filters: Any,
    ) -> list[SearchResult]:
        """Search the user's memories, best first.

        Args:
            user_id: whose memories to search.
            query: text; embedded for vector search when ``vector`` is not given.
            vector: a precomputed query vector.
            mode: ``"vector"``, ``"keyword"`` (full text) or ``"hybrid"`` (both, fused by rank).
            limit: how many results at most.
            count_access: count an access of every hit (False: the search writes nothing).
            **filters: ``memory_type`` (str or list), ``session_id``, ``agent_id``,
                ``created_after``, ``created_before``, ``metadata`` (dict of equalities).
        """
        flt = make_filter(**filters)
        op = self._search_op(user_id, query, vector, mode, limit, flt, count_access)
        if op.vector is None and op.mode != "keyword":
            assert self.embedder is not None and query is not None
            op = op._replace(vector=check_vector(self.embedder.embed([query])[0], self.dimension))
        return cast(list[SearchResult], self.batch([op])[0])

    def update(self, user_id: str, memory_id: uuid.UUID | str, **fields: Any) -> MemoryRecord:
        """Change ``content``, ``embedding``, ``memory_type``, ``importance`` or ``metadata``.

        Raises:
            NotFoundError: no such memory for this user.
        """
        op = self._update_op(user_id, memory_id, fields)
        if op.content is not None and op.embedding is None:
            assert self.embedder is not None
            op = op._replace(
                embedding=check_vector(self.embedder.embed([op.content])[0], self.dimension)
            )
        return cast(MemoryRecord, self.batch([op])[0])

    def delete(self, user_id: str, memory_id: uuid.UUID | str) -> bool:
        """Delete one memory; ``False`` if the user has no memory with this id."""
        return self.delete_many(user_id, [memory_id]) == 1

    def delete_many(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Delete the user's memories among ``memory_ids``; how many were deleted."""
        op = DeleteOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(int, self.batch([op])[0])

    def delete_user(self, user_id: str) -> int:
        """Erase every memory of ``user_id``; how many were deleted."""
        return cast(int, self.batch([DeleteUserOp(check_user_id(user_id))])[0])

    def list(
        self, user_id: str, *, limit: int = 100, offset: int = 0, **filters: Any
    ) -> builtins.list[MemoryRecord]:
        """A page of the user's memories, newest first."""
        op = self._list_op(user_id, limit, offset, filters)
        return cast(builtins.list[MemoryRecord], self.batch([op])[0])

    def count(self, user_id: str, **filters: Any) -> int:
        """How many memories the user has (matching the filters)."""
        return cast(int, self.batch([CountOp(check_user_id(user_id), make_filter(**filters))])[0])

    def stats(self, user_id: str) -> StoreStats:
        """Counts per type, time span, access and importance figures of the user."""
        return cast(StoreStats, self.batch([StatsOp(check_user_id(user_id))])[0])

    # -- the transcript (see tiermem.stores.transcript) --

    def append(
        self,
        user_id: str,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        agent_id: str | None = None,
        previous_id: str | None = None,
        max_chars: int = MAX_CONTENT_CHARS,
    ) -> int:
        """Append messages of a (user, session) to the transcript in one transaction.

        A worker embeds and indexes them later (see :mod:`tiermem.stores.transcript`);
        until then :meth:`unindexed` finds them. Returns how many were added: a message id
        the user already has is not added again.

        Args:
            previous_id: the id of the message before the first one (for context).
            max_chars: the longest line (speaker and text) accepted.
        """
        op = append_op(user_id, session_id, messages, agent_id, previous_id, max_chars)
        return cast(int, self.batch([op])[0])

    def recent(self, user_id: str, session_id: str | None, limit: int) -> builtins.list[Message]:
        """The newest ``limit`` messages of a (user, session), oldest first."""
        op = tr.RecentOp(
            check_user_id(user_id), check_text_id(session_id, "session_id"), check_limit(limit)
        )
        return cast(builtins.list["Message"], self.batch([op])[0])

    def transcript(
        self,
        user_id: str,
        *,
        session_id: str | None = None,
        any_session: bool = True,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> builtins.list[tr.TranscriptRow]:
        """A page of the user's transcript rows with ``seq`` above ``after``, in order.

        ``any_session=False`` keeps one session's (``session_id``, ``None`` for messages
        without one); ``state`` keeps ``pending``, ``done`` or ``failed`` rows.
        """
        if state is not None and state not in tr.WORK_STATES:
            raise InputError(
                "state", f"{state!r} is not a work state", f"use one of {tr.WORK_STATES}"
            )
        op = tr.TranscriptOp(
            check_user_id(user_id),
            check_text_id(session_id, "session_id"),
            bool(any_session),
            state,
            _check_position(after),
            check_limit(limit),
        )
        return cast(builtins.list[tr.TranscriptRow], self.batch([op])[0])

    def unindexed(self, user_id: str, limit: int = 500) -> builtins.list[tr.TranscriptRow]:
        """The user's newest messages not in the index yet (pending or failed)."""
        op = tr.UnindexedOp(check_user_id(user_id), check_limit(limit))
        return cast(builtins.list[tr.TranscriptRow], self.batch([op])[0])

    def sessions(self, user_id: str) -> builtins.list[tr.SessionInfo]:
        """The user's sessions, most recently active first."""
        return cast(
            builtins.list[tr.SessionInfo], self.batch([tr.SessionsOp(check_user_id(user_id))])[0]
        )

    def users(self, limit: int = 100, after: str = "") -> builtins.list[str]:
        """Admin (every user): the ids of the users with messages or memories, in
        order; pass the last id as ``after`` for the next page."""
        if not isinstance(after, str):
            raise InvalidTypeError("after", f"must be a str, got {type(after).__name__}")
        op = tr.UsersOp(check_limit(limit), after)
        return cast(builtins.list[str], self.batch([op])[0])

    def work_stats(self, user_id: str | None = None) -> tr.WorkStats:
        """Transcript rows pending, done and failed (one user's, or everyone's)."""
        op = tr.WorkStatsOp(None if user_id is None else check_user_id(user_id))
        return cast(tr.WorkStats, self.batch([op])[0])

    def failed(self, user_id: str, limit: int = 100) -> builtins.list[tr.TranscriptRow]:
        """The user's messages whose indexing failed, with the reason (``error``)."""
        return self.transcript(user_id, state="failed", limit=limit)

    def retry_failed(self, user_id: str, seqs: Sequence[int] | None = None) -> int:
        """Put the user's failed messages (all, or ``seqs``) back in the queue."""
        op = tr.RetryOp(
            check_user_id(user_id), None if seqs is None else tuple(int(s) for s in seqs)
        )
        return cast(int, self.batch([op])[0])

    def forget_messages(self, user_id: str, message_ids: Sequence[str]) -> int:
        """Delete the user's messages with these ids from the transcript (and their index
        rows, unless another message says the same); how many were deleted."""
        ids = tuple(check_text_id(m, "message_ids") or "" for m in message_ids)
        return cast(int, self.batch([tr.ForgetMessagesOp(check_user_id(user_id), ids)])[0])

    def forget_session(self, user_id: str, session_id: str | None) -> int:
        """Delete a session's messages and summary; how many messages were deleted."""
        op = tr.ForgetMessagesOp(
            check_user_id(user_id), (), True, check_text_id(session_id, "session_id")
        )
        return cast(int, self.batch([op])[0])

    def summary(self, user_id: str, session_id: str | None) -> tr.SessionSummary:
        """The running summary of a (user, session) and the transcript position it covers."""
        op = tr.SummaryOp(check_user_id(user_id), check_text_id(session_id, "session_id"))
        return cast(tr.SessionSummary, self.batch([op])[0])

    # -- derived async API (same validation, async embedding, abatch) --

    async def aadd(
        self,
        user_id: str,
        content: str,
        *,
        embedding: Any = None,
        memory_type: str = "fact",
        agent_id: str | None = None,
        session_id: str | None = None,
        importance: float = DEFAULT_IMPORTANCE,
        metadata: Mapping[str, Any] | None = None,
    ) -> uuid.UUID:
        """Async twin of :meth:`add`."""
        mem = NewMemory(content, embedding, memory_type, agent_id, session_id, importance, metadata)
        return (await self.aadd_many(user_id, [mem]))[0]

    async def aadd_many(
        self,
        user_id: str,
        contents: Sequence[str | NewMemory],
        *,
        embeddings: Sequence[Any] | np.ndarray | None = None,
        **defaults: Any,
    ) -> builtins.list[uuid.UUID]:
        """Async twin of :meth:`add_many`."""
        items, missing = self._new_memories(user_id, contents, embeddings, defaults)
        if missing:
            assert self.embedder is not None
            vectors = await self.embedder.aembed([items[i].content for i in missing])
            items = self._fill(items, missing, vectors)
        return cast(
            builtins.list[uuid.UUID], (await self.abatch([AddOp(user_id, tuple(items))]))[0]
        )

    async def aget(self, user_id: str, memory_id: uuid.UUID | str) -> MemoryRecord | None:
        """Async twin of :meth:`get`."""
        found = await self.aget_many(user_id, [memory_id])
        return found[0] if found else None

    async def aget_many(
        self, user_id: str, memory_ids: Sequence[uuid.UUID | str]
    ) -> builtins.list[MemoryRecord]:
        """Async twin of :meth:`get_many`."""
        op = GetOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(builtins.list[MemoryRecord], (await self.abatch([op]))[0])

    async def arecord_access(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Async twin of :meth:`record_access`."""
        op = AccessOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(int, (await self.abatch([op]))[0])

    async def asearch(
        self,
        user_id: str,
        query: str | None = None,
        *,
        vector: Any = None,
        mode: SearchMode = "vector",
        limit: int = 10,
        count_access: bool = True,
        **filters: Any,
    ) -> builtins.list[SearchResult]:
        """Async twin of :meth:`search`."""
        flt = make_filter(**filters)
        op = self._search_op(user_id, query, vector, mode, limit, flt, count_access)
        if op.vector is None and op.mode != "keyword":
            assert self.embedder is not None and query is not None
            vec = (await self.embedder.aembed([query]))[0]
            op = op._replace(vector=check_vector(vec, self.dimension))
        return cast(builtins.list[SearchResult], (await self.abatch([op]))[0])

    async def aupdate(
        self, user_id: str, memory_id: uuid.UUID | str, **fields: Any
    ) -> MemoryRecord:
        """Async twin of :meth:`update`."""
        op = self._update_op(user_id, memory_id, fields)
        if op.content is not None and op.embedding is None:
            assert self.embedder is not None
            vec = (await self.embedder.aembed([op.content]))[0]
            op = op._replace(embedding=check_vector(vec, self.dimension))
        return cast(MemoryRecord, (await self.abatch([op]))[0])

    async def adelete(self, user_id: str, memory_id: uuid.UUID | str) -> bool:
        """Async twin of :meth:`delete`."""
        return (await self.adelete_many(user_id, [memory_id])) == 1

    async def adelete_many(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Async twin of :meth:`delete_many`."""
        op = DeleteOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(int, (await self.abatch([op]))[0])

    async def adelete_user(self, user_id: str) -> int:
        """Async twin of :meth:`delete_user`."""
        return cast(int, (await self.abatch([DeleteUserOp(check_user_id(user_id))]))[0])

    async def alist(
        self, user_id: str, *, limit: int = 100, offset: int = 0, **filters: Any
    ) -> builtins.list[MemoryRecord]:
        """Async twin of :meth:`list`."""
        op = self._list_op(user_id, limit, offset, filters)
        return cast(builtins.list[MemoryRecord], (await self.abatch([op]))[0])

    async def acount(self, user_id: str, **filters: Any) -> int:
        """Async twin of :meth:`count`."""
        return cast(
            int, (await self.abatch([CountOp(check_user_id(user_id), make_filter(**filters))]))[0]
        )

    async def astats(self, user_id: str) -> StoreStats:
        """Async twin of :meth:`stats`."""
        return cast(StoreStats, (await self.abatch([StatsOp(check_user_id(user_id))]))[0])

    async def aappend(
        self,
        user_id: str,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        agent_id: str | None = None,
        previous_id: str | None = None,
        max_chars: int = MAX_CONTENT_CHARS,
    ) -> int:
        """Async twin of :meth:`append`."""
        op = append_op(user_id, session_id, messages, agent_id, previous_id, max_chars)
        return cast(int, (await self.abatch([op]))[0])

    async def arecent(
        self, user_id: str, session_id: str | None, limit: int
    ) -> builtins.list[Message]:
        """Async twin of :meth:`recent`."""
        op = tr.RecentOp(
            check_user_id(user_id), check_text_id(session_id, "session_id"), check_limit(limit)
        )
        return cast(builtins.list["Message"], (await self.abatch([op]))[0])

    async def asessions(self, user_id: str) -> builtins.list[tr.SessionInfo]:
        """Async twin of :meth:`sessions`."""
        op = tr.SessionsOp(check_user_id(user_id))
        return cast(builtins.list[tr.SessionInfo], (await self.abatch([op]))[0])


def bump_access(record: MemoryRecord, now: datetime) -> MemoryRecord:
    """The record as it is after one more access (what the store just wrote).

    A shallow copy with two fields set: ``dataclasses.replace`` re-runs ``__init__`` and
    costs five times more, which shows on searches that return hundreds of records.
    """
    bumped = copy.copy(record)
    object.__setattr__(bumped, "access_count", record.access_count + 1)
    object.__setattr__(bumped, "accessed_at", now)
    return bumped
