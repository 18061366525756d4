"""The PostgreSQL store's reads as plans: SQL and row shaping written once, no connection.

Each builder returns a :data:`~tiermem.stores.plans.Plan` (statements yielded one at a
time, rows sent back); :meth:`PostgresStore.batch` runs it on a pooled sync connection
and :meth:`PostgresStore.abatch` on a pooled async one (see :mod:`.plans`). What is here
is the memory index's reads (by id, a page, a count, access counts, vector and keyword
hits); the transcript's reads are plans of :class:`~tiermem.stores.transcript_sql.TranscriptSQL`,
shared with SQLite.

Vector search picks its plan by the user's row count (docs/stores.md): up to
``exact_max_rows`` rows an exact scan through the btree on ``user_id``; bigger users the
HNSW index with ``hnsw.iterative_scan = relaxed_order`` and ``hnsw.ef_search``, the exact
plan answering when HNSW returns too few rows; a search of a user with ``own_graph_rows``
rows starts the build of their own graph (:mod:`.own_graphs`), which the next searches
walk.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import numpy as np

import tiermem.stores.ops as ops
from tiermem.stores.common_terms import CommonTerms
from tiermem.stores.dialect import Clause, Dialect, filter_clause, read_record
from tiermem.stores.ops import SearchOp
from tiermem.stores.own_graphs import OwnGraphs
from tiermem.stores.plans import Plan, Setting
from tiermem.stores.user_cache import UserCache
from tiermem.text import keyword_terms
from tiermem.types.filters import MemoryFilter
from tiermem.types.records import MemoryRecord, SearchResult

COLUMNS = (
    "id, user_id, agent_id, session_id, content, content_hash, memory_type, importance,"
    " created_at, accessed_at, access_count, metadata, embedding"
)
MATCHED = ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(","))
""":data:`COLUMNS` of the table named ``m`` (a big user's keyword hits, fetched by id)."""
#: The HNSW opclass indexes at most 2000 dimensions; wider tables search exactly.
HNSW_MAX_DIMENSION = 2000
COUNT_TTL = 30.0
"""Seconds a user's cached row count (it only picks the vector plan) is trusted."""
COUNTS_MAX = 10_000
"""Users whose row counts a store keeps (the oldest go first): a process serving a
million users keeps a bounded dict, not one entry per user it ever saw."""


def record(row: dict[str, Any]) -> MemoryRecord:
    return read_record(row, DIALECT)


def where(user_id: str, flt: MemoryFilter) -> Clause:
    """``WHERE`` clause (user first, then the filter) and its parameters."""
    return filter_clause(user_id, flt, DIALECT)


@lru_cache(maxsize=4096)
def real(value: float) -> float:
    """A ``real`` column's value as its text form gives it (0.8, not 0.800000011920929):
    rows come in binary, and a float4 read that way carries the float32's error. Cached:
    a store's importances are few values, and each costs a string round trip."""
    return float(str(np.float32(value)))


DIALECT = Dialect(
    mark="%s",
    claim_lock=" FOR UPDATE SKIP LOCKED",
    row_lock=" FOR UPDATE",
    read_id=lambda value: value,
    read_real=real,
    read_time=lambda value: value.astimezone(timezone.utc),
    read_json=lambda value: value,
    read_vector=lambda value: (
        value if isinstance(value, np.ndarray) else np.asarray(value.to_numpy(), dtype=np.float32)
    ),
    write_id=lambda value: value,
    write_time=lambda value: value,
    write_vector=lambda vector: np.asarray(vector, dtype=np.float32),
    json_mark="%s::jsonb",
    one_of=lambda column, values: (f"{column} = ANY(%s)", [list(values)]),
    has_metadata=lambda column, metadata: (f"{column} @> %s::jsonb", [json.dumps(dict(metadata))]),
    metadata_text=lambda column, key: f"{column}->>'{key}'",
)
"""How PostgreSQL keeps a memory's columns: native uuids, timestamptz and jsonb, binary
pgvector vectors (pgvector's, or float32 arrays already: :mod:`.postgres_rounds`)."""


def count_of(rows: list[dict[str, Any]]) -> int:
    """The ``n`` column of a one-row count query's rows."""
    return int(rows[0]["n"])


class PostgresPlans:
    """The read plans of the index on PostgreSQL (a mixin of
    :class:`~tiermem.stores.postgres.PostgresIndex`)."""

    table: str
    dimension: int
    exact_max_rows: int
    ef_search: int
    own_graph_rows: int
    own_graphs: OwnGraphs | None
    common_terms: CommonTerms
    _counts: UserCache[int]

    def _by_ids_plan(self, user_id: str, ids: Sequence[uuid.UUID]) -> Plan[list[MemoryRecord]]:
        order = {i: n for n, i in enumerate(ids)}
        sql = f"SELECT {COLUMNS} FROM {self.table} WHERE user_id = %s AND id = ANY(%s)"
        records = [record(r) for r in (yield (sql, (user_id, list(order))))]
        return sorted(records, key=lambda r: order[r.id])

    def _count_access_plan(
        self, user_id: str, ids: Sequence[uuid.UUID], now: datetime, times: int = 1
    ) -> Plan[int]:
        """Add ``times`` to the records' access counts (in the current transaction).

        A batch of reads commits without waiting for the WAL flush (see
        :func:`~tiermem.stores.sql.relaxed_commit`): a crash may forget the last few access
        counts, never data. The table's fillfactor leaves room on each page so these
        updates are HOT and skip the HNSW index (5 ms -> 0.3 ms).
        """
        counted: int = yield (
            f"UPDATE {self.table} SET access_count = access_count + %s, accessed_at = %s"
            " WHERE user_id = %s AND id = ANY(%s)",
            (times, now, user_id, list(ids)),
        )
        return counted

    def _user_rows_plan(self, user_id: str) -> Plan[int]:
        """The user's row count, cached for a few seconds (it only picks the plan)."""
        cached = self._counts.get(user_id)
        if cached is not None:
            return cached
        sql = f"SELECT count(*) AS n FROM {self.table} WHERE user_id = %s"
        n = count_of((yield (sql, [user_id])))
        self._counts.put(user_id, n)
        return n

    def _vector_plan(self, op: SearchOp, limit: int) -> Plan[list[SearchResult]]:
        clause, params = where(op.user_id, op.filter)
        vec = op.vector
        count = yield from self._user_rows_plan(op.user_id)
        rows: list[dict[str, Any]] = []
        if count > self.exact_max_rows and self.dimension <= HNSW_MAX_DIMENSION:
            if self.own_graphs is not None and count >= self.own_graph_rows:
                self.own_graphs.want(op.user_id, count)  # the next searches walk it
            ef = str(max(self.ef_search, limit))
            yield Setting("SELECT set_config('hnsw.ef_search', %s, true)", (ef,))
            yield Setting("SET LOCAL hnsw.iterative_scan = relaxed_order", ())
            sql = (
                f"SELECT {COLUMNS}, embedding <=> %s AS dist FROM {self.table}"
                f" WHERE {clause} ORDER BY embedding <=> %s LIMIT %s"
            )
            rows = yield (sql, [vec, *params, vec, limit])
        if len(rows) < limit:
            # Exact: OFFSET 0 keeps the planner from answering the ORDER BY with HNSW.
            sql = (
                f"SELECT * FROM (SELECT {COLUMNS}, embedding <=> %s AS dist FROM {self.table}"
                f" WHERE {clause} OFFSET 0) AS mine ORDER BY dist LIMIT %s"
            )
            rows = yield (sql, [vec, *params, limit])
        rows.sort(key=lambda r: r["dist"])  # relaxed_order: HNSW's may come a little unsorted
        return [SearchResult(record(r), 1.0 - float(r["dist"])) for r in rows]

    def _keyword_plan(self, op: SearchOp, limit: int) -> Plan[list[SearchResult]]:
        terms = keyword_terms(op.text or "")
        if not terms:
            return []
        clause, params = where(op.user_id, op.filter)
        query = " | ".join(f"'{t}'" for t in terms)  # \w+ tokens: no quotes or operators
        if (yield from self._user_rows_plan(op.user_id)) <= self.exact_max_rows:
            # A small user's rows through the user_id btree, then matched: the GIN index
            # would read every user's postings of the terms (its cost grows with the
            # store; OFFSET 0 keeps the planner from choosing it).
            sql = (
                f"SELECT {COLUMNS}, ts_rank_cd(tsv, q) AS rank"
                f" FROM (SELECT {COLUMNS}, tsv FROM {self.table} WHERE {clause} OFFSET 0)"
                " AS mine, to_tsquery('english', %s) AS q"
                " WHERE tsv @@ q ORDER BY rank DESC, id LIMIT %s"
            )
            rows = yield (sql, [*params, query, limit])
        else:
            # A big user: only the newest KEYWORD_SCAN matches are ranked (ranking is the
            # cost: 547 ms of an 852 ms context went to ranking a 100k-message user's
            # 21,566 matches), as on SQLite; found newest first through (user_id, created_at),
            # or through the GIN index (the user's own, :mod:`.own_graphs`) when the terms
            # that choose them are rare: the user's common words only rank (:mod:`.common_terms`).
            # The matches are ranked by id and words only, and the ``limit`` best fetched
            # after: the wide rows of thousands of matches, sorted by time, spilled to disk.
            choosing = yield from self.common_terms.choosing(op.user_id, terms)
            chosen = " | ".join(f"'{t}'" for t in choosing)
            sql = (
                f"SELECT {MATCHED}, best.rank FROM (SELECT id, ts_rank_cd(tsv, q) AS rank FROM"
                f" (SELECT id, tsv FROM {self.table}"
                f" WHERE tsv @@ to_tsquery('english', %s) AND {clause}"
                " ORDER BY created_at DESC LIMIT %s) AS newest, to_tsquery('english', %s) AS q"
                f" ORDER BY rank DESC, id LIMIT %s) AS best JOIN {self.table} AS m"
                " ON m.user_id = %s AND m.id = best.id ORDER BY best.rank DESC, best.id"
            )
            rows = yield (sql, [chosen, *params, ops.KEYWORD_SCAN, query, limit, op.user_id])
        return [SearchResult(record(r), real(r["rank"])) for r in rows]
