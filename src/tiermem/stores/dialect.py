"""What the two engines' SQL keeps differently (:class:`Dialect`: the parameter mark,
ids, times, JSON, vectors, list and metadata tests), and over it, once for both, a row of
the memory index read into a record and a filter written as a ``WHERE`` clause."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from tiermem.stores.ops import MemoryFilter
from tiermem.stores.records import MemoryRecord

Clause = tuple[str, list[object]]
"""SQL and its parameters."""


class Dialect(NamedTuple):
    """How one engine stores and compares the columns the two engines keep differently."""

    mark: str
    """The parameter placeholder (``?``, ``%s``)."""
    read_id: Callable[[Any], Any]
    read_real: Callable[[Any], float]
    read_time: Callable[[Any], datetime]
    read_json: Callable[[Any], Any]
    read_vector: Callable[[Any], np.ndarray]
    write_time: Callable[[datetime], object]
    one_of: Callable[[str, Sequence[str]], Clause]
    """``column`` equal to one of the values."""
    has_metadata: Callable[[str, Mapping[str, Any]], Clause]
    """``column`` (JSON) holding every key with its value."""


def read_record(row: Any, dialect: Dialect) -> MemoryRecord:
    """The record of a row of the memory index (read by column name)."""
    return MemoryRecord(
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
