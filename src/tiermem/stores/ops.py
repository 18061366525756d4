"""The operations a store runs: small NamedTuples handed to :meth:`MemoryStore.batch`.

These are the memory index's; the transcript's are in :mod:`tiermem.stores.transcript`,
the work queue's in :mod:`tiermem.stores.queue` and the facts' in :mod:`tiermem.stores.facts`.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, NamedTuple, TypeAlias, TypedDict, get_args

import numpy as np
from typing_extensions import Unpack

from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError, refuse_unknown
from tiermem.stores.records import MemoryRecord, NewMemory
from tiermem.stores.validate import check_aware, check_memory_type, check_text_id

SearchMode = Literal["vector", "keyword", "hybrid"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)

Op: TypeAlias = tuple[Any, ...]
"""Any operation (every op is a NamedTuple); the SQL core's handler table knows them all."""


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
    ``shared``: the records may be objects the store keeps (SQLite's row cache), for a
    caller that only reads them (the retriever); else each has its own metadata dict.
    """

    user_id: str
    mode: str
    vector: np.ndarray | None
    text: str | None
    limit: int = 10
    filter: MemoryFilter = NO_FILTER
    count_access: bool = True
    shared: bool = False


KEYWORD_SCAN = 5_000
"""Matches of a keyword search ranked at most, the newest first (both engines): what
bounds a big user's keyword search (a 100k-message user's common words match tens of
thousands of rows; on SQLite ranking them all took 90-150 ms, the newest 5,000 28 ms).
Older matches are still found by vector search."""


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


class Filters(TypedDict, total=False):
    """The keyword filters of search, list and count, as every face takes them: a type
    (or several), a session, an agent, a creation-time window, and ``metadata`` (top-level
    keys equal to these str, int, float, bool or None values)."""

    memory_type: str | Iterable[str] | None
    session_id: str | None
    agent_id: str | None
    created_after: datetime | None
    created_before: datetime | None
    metadata: Mapping[str, Any] | None


SEARCH_FILTERS = frozenset(Filters.__annotations__)
"""The names of the keyword filters."""

INT64 = (-(2**63), 2**63 - 1)
"""The ints a metadata filter compares: what every engine holds as a JSON number."""


def _check_number(value: object, name: str) -> None:
    """A filter's number: finite, and an int within 64 bits (the engines compare no other)."""
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        raise InvalidSizeError(
            name, "is an int outside 64 bits", "compare numbers from -2**63 to 2**63 - 1"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(name, f"is {value}, which no stored value equals", "use a finite number")


def check_search_filters(filters: object) -> Mapping[str, Any]:
    """``search``'s ``filters``: a dict whose keys are :data:`SEARCH_FILTERS` (the user, the
    query, the limit and the mode are arguments of their own, never filters)."""
    if not isinstance(filters, Mapping):
        raise InvalidTypeError("filters", f"expected a dict, got {type(filters).__name__}")
    for key in filters:
        if not isinstance(key, str):
            raise InvalidTypeError("filters", f"has a key of type {type(key).__name__}, not str")
    if "user_id" in filters:
        raise InvalidTypeError(
            "filters.user_id",
            "is not a filter",
            "a search reads the memories of its user_id argument only; pass the user there",
        )
    refuse_unknown(filters, SEARCH_FILTERS, "filters", "a filter")
    return filters


def make_filter(**filters: Unpack[Filters]) -> MemoryFilter:
    """Validate the keyword filters of the derived methods into a :class:`MemoryFilter`."""
    refuse_unknown(filters, SEARCH_FILTERS, "filters", "a filter")
    memory_type = filters.get("memory_type")
    metadata = filters.get("metadata")
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
            _check_number(val, f"metadata.{key}")
    return MemoryFilter(
        memory_types=types,
        session_id=check_text_id(filters.get("session_id"), "session_id"),
        agent_id=check_text_id(filters.get("agent_id"), "agent_id"),
        created_after=check_aware(filters.get("created_after"), "created_after"),
        created_before=check_aware(filters.get("created_before"), "created_before"),
        metadata=dict(metadata) if metadata else None,
    )
