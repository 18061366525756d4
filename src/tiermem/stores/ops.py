"""The operations a store runs: small NamedTuples handed to :meth:`MemoryStore.batch`.

These are the memory index's; the transcript's are in :mod:`tiermem.stores.transcript`,
the work queue's in :mod:`tiermem.stores.queue` and the facts' in :mod:`tiermem.stores.facts`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple, TypeAlias, get_args

import numpy as np

from tiermem.stores.records import NewMemory
from tiermem.types.filters import NO_FILTER, MemoryFilter
from tiermem.types.records import MemoryRecord

SearchMode = Literal["vector", "keyword", "hybrid"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)

Op: TypeAlias = tuple[Any, ...]
"""Any operation (every op is a NamedTuple); the SQL core's handler table knows them all."""


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
