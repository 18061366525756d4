"""What the two engines' SQL keeps differently (:class:`Dialect`: the parameter mark,
ids, times, JSON, vectors, list and metadata tests, row locks), and over it, once for both, a row of
the memory index read into a record and a filter written as a ``WHERE`` clause."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from tiermem.stores.ops import UpdateOp
from tiermem.types.filters import MemoryFilter
from tiermem.types.records import MemoryRecord

Clause = tuple[str, list[object]]
"""SQL and its parameters."""
RECORD_COLUMNS = (
    "id",
    "user_id",
    "agent_id",
    "session_id",
    "content",
    "content_hash",
    "memory_type",
    "importance",
    "created_at",
    "accessed_at",
    "access_count",
    "metadata",
    "embedding",
)
"""The memory index's columns, in the order of :func:`record_values`."""


class Dialect(NamedTuple):
    """How one engine stores and compares the columns the two engines keep differently."""

    mark: str
    """The parameter placeholder (``?``, ``%s``)."""
    read_id: Callable[[Any], Any]
    read_real: Callable[[Any], float]
    read_time: Callable[[Any], datetime]
    read_json: Callable[[Any], Any]
    read_vector: Callable[[Any], np.ndarray]
    write_id: Callable[[uuid.UUID], object]
    write_time: Callable[[datetime], object]
    write_vector: Callable[[Any], object]
    json_mark: str
    """The placeholder of a JSON value (``?``, ``%s::jsonb``)."""
    one_of: Callable[[str, Sequence[str]], Clause]
    """``column`` equal to one of the values."""
    has_metadata: Callable[[str, Mapping[str, Any]], Clause]
    """``column`` (JSON) holding every key with its value."""
    metadata_text: Callable[[str, str], str]
    """The text of one key of ``column`` (JSON), as an SQL expression."""
    claim_lock: str = ""
    """What a claim's SELECT appends to lock the rows it takes (and skip locked ones)."""
    row_lock: str = ""
    """What a SELECT appends to lock the row it reads until the transaction ends."""
    user_filter: str = "user_id"
    """How a query names ``user_id`` when the index on the work state should serve it
    (SQLite: ``+user_id``, so its planner does not walk the user's whole session index)."""


def read_record(row: Any, dialect: Dialect) -> MemoryRecord:
    """The record of a row of the memory index (read by column name)."""
    return MemoryRecord.stored(
        id=dialect.read_id(row["id"]),
        user_id=row["user_id"],
        agent_id=row["agent_id"],
        session_id=row["session_id"],
        content=row["content"],
        content_hash=row["content_hash"],
        memory_type=row["memory_type"],
        importance=dialect.read_real(row["importance"]),
        created_at=dialect.read_time(row["created_at"]),
        accessed_at=dialect.read_time(row["accessed_at"]),
        access_count=row["access_count"],
        metadata=dialect.read_json(row["metadata"]),
        embedding=dialect.read_vector(row["embedding"]),
    )


def filter_clause(user_id: str, flt: MemoryFilter, dialect: Dialect, alias: str = "") -> Clause:
    """``WHERE`` clause (user first, then the filter) and its parameters; ``alias``
    qualifies the columns."""
    p, mark = f"{alias}." if alias else "", dialect.mark
    sql = [f"{p}user_id = {mark}"]
    params: list[object] = [user_id]
    clauses = []
    if flt.memory_types:
        clauses.append(dialect.one_of(f"{p}memory_type", flt.memory_types))
    for column in ("session_id", "agent_id"):
        value = getattr(flt, column)
        if value is not None:
            clauses.append((f"{p}{column} = {mark}", [value]))
    if flt.created_after is not None:
        clauses.append((f"{p}created_at >= {mark}", [dialect.write_time(flt.created_after)]))
    if flt.created_before is not None:
        clauses.append((f"{p}created_at < {mark}", [dialect.write_time(flt.created_before)]))
    if flt.metadata:
        clauses.append(dialect.has_metadata(f"{p}metadata", flt.metadata))
    for clause, values in clauses:
        sql.append(clause)
        params.extend(values)
    return " AND ".join(sql), params


def insert_sql(table: str, dialect: Dialect, extra: tuple[str, ...] = ()) -> str:
    """The ``INSERT`` of a row of :func:`record_values` (then ``extra`` columns)."""
    columns = (*RECORD_COLUMNS, *extra)
    marks = ", ".join([dialect.mark] * len(columns))
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"


def record_values(r: MemoryRecord, dialect: Dialect) -> tuple[object, ...]:
    """A record's values in a row of the memory index (:data:`RECORD_COLUMNS`)."""
    return (
        dialect.write_id(r.id),
        r.user_id,
        r.agent_id,
        r.session_id,
        r.content,
        r.content_hash,
        r.memory_type,
        r.importance,
        dialect.write_time(r.created_at),
        dialect.write_time(r.accessed_at),
        r.access_count,
        json.dumps(r.metadata),
        dialect.write_vector(r.embedding),
    )


def update_sets(op: UpdateOp, digest: str | None, dialect: Dialect) -> Clause:
    """The ``SET`` assignments of an update (``digest``: the new content's hash), joined
    by commas, and their parameters; empty when nothing changes."""
    mark = dialect.mark
    sets: list[str] = []
    params: list[object] = []
    if digest is not None:
        sets += [f"content = {mark}", f"content_hash = {mark}"]
        params += [op.content, digest]
    if op.embedding is not None:
        sets.append(f"embedding = {mark}")
        params.append(dialect.write_vector(op.embedding))
    for column in ("memory_type", "importance"):
        if getattr(op, column) is not None:
            sets.append(f"{column} = {mark}")
            params.append(getattr(op, column))
    if op.metadata is not None:
        sets.append(f"metadata = {dialect.json_mark}")
        params.append(json.dumps(op.metadata))
    return ", ".join(sets), params
