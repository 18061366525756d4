"""PostgresStore: long-term memory on PostgreSQL + pgvector (HNSW, btree, tsvector GIN).

Per-user vector search picks its plan by the user's row count, because neither plan is
right for every user (measured on pgvector 0.8.5, docs/stores.md):

* up to ``exact_max_rows`` rows: an exact scan of the user's rows through the btree on
  ``user_id`` (recall 1.0, under a millisecond for 1k rows). The planner's own choice,
  HNSW then filter, returns too few rows for a small user.
* bigger users: the HNSW index with ``hnsw.iterative_scan = relaxed_order`` and
  ``hnsw.ef_search``; if it still returns fewer rows than asked while the user has
  more, the exact plan answers instead.

Connections come from a psycopg_pool with ``prepare_threshold=None``: a prepared plan
would not see the per-transaction ``SET LOCAL`` of the search settings.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

import tiermem.stores.copies as copies
import tiermem.stores.facts as facts
import tiermem.stores.schema as schema
import tiermem.stores.transcript as transcript
from tiermem.errors import InvalidSizeError, InvalidTypeError, StoreError, StoreUnavailableError
from tiermem.stores.ops import (
    ListOp,
    MemoryFilter,
    Op,
    SearchOp,
    UpdateOp,
)
from tiermem.stores.partitions import MAX_PARTITIONS, check_layout, partitioned
from tiermem.stores.pgsetup import ensure_vector, import_driver
from tiermem.stores.records import MemoryRecord, ReplicaStatus, SearchResult, StoreStats
from tiermem.stores.replica import (
    DEFAULT_RETRY,
    DEFAULT_WAIT,
    Replica,
    primary_lsn,
    replica_reads,
)
from tiermem.stores.sql import SQLStore, writes
from tiermem.stores.validate import check_durability
from tiermem.text import keyword_terms

if TYPE_CHECKING:
    import psycopg

    from tiermem.embeddings.base import Embedder

_COLUMNS = (
    "id, user_id, agent_id, session_id, content, content_hash, memory_type, importance,"
    " created_at, accessed_at, access_count, metadata, embedding"
)
#: The HNSW opclass indexes at most 2000 dimensions; wider tables search exactly.
HNSW_MAX_DIMENSION = 2000
#: Characters of content indexed for keyword search (a tsvector holds at most 1 MB).
TSV_MAX_CHARS = 200_000
_COUNT_TTL = 30.0
_COUNTS_MAX = 10_000
"""Users whose row counts a store keeps (the oldest go first): a process serving a
million users keeps a bounded dict, not one entry per user it ever saw."""


def _v1(t: str, dim: int) -> list[str]:
    statements = [
        f"""CREATE TABLE {t} (
            id uuid PRIMARY KEY,
            user_id text NOT NULL,
            agent_id text,
            session_id text,
            content text NOT NULL,
            content_hash text NOT NULL,
            embedding vector({dim}) NOT NULL,
            memory_type text NOT NULL,
            importance real NOT NULL DEFAULT 0.5,
            created_at timestamptz NOT NULL DEFAULT now(),
            accessed_at timestamptz NOT NULL DEFAULT now(),
            access_count integer NOT NULL DEFAULT 0,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            tsv tsvector GENERATED ALWAYS AS
                (to_tsvector('simple', left(content, {TSV_MAX_CHARS}))) STORED,
            UNIQUE (user_id, content_hash)) WITH (fillfactor = 70)""",
        f"CREATE INDEX {t}_user_created ON {t} (user_id, created_at DESC)",
        f"CREATE INDEX {t}_tsv ON {t} USING gin (tsv)",
        f"CREATE INDEX {t}_importance ON {t} (importance DESC)",
    ]
    if dim <= HNSW_MAX_DIMENSION:
        statements.append(
            f"CREATE INDEX {t}_embedding ON {t} USING hnsw (embedding vector_cosine_ops)"
        )
    return statements


def _v2_stemmed_keywords(t: str, dim: int) -> list[str]:
    """Keyword search with the ``english`` configuration (stemming, stop words), as on
    SQLite: "painting" finds "paints"."""
    return [
        f"ALTER TABLE {t} DROP COLUMN tsv",
        f"ALTER TABLE {t} ADD COLUMN tsv tsvector GENERATED ALWAYS AS"
        f" (to_tsvector('english', left(content, {TSV_MAX_CHARS}))) STORED",
        f"CREATE INDEX {t}_tsv ON {t} USING gin (tsv)",
    ]


def _v3_user_keys(t: str, dim: int) -> list[str]:
    """Keys that lead with ``user_id`` so tables distribute by user (named
    ``003_transcript``: it came with the transcript, whose tables have their own history)."""
    return [
        f"ALTER TABLE {t} DROP CONSTRAINT {t}_pkey",
        f"ALTER TABLE {t} ADD PRIMARY KEY (user_id, id)",
        f"CREATE INDEX {t}_id ON {t} (id)",
    ]


#: Schema history of a ``memories_{dim}`` table; append, never edit.
MIGRATIONS = [
    schema.Migration("001_create", _v1),
    schema.Migration("002_stemmed_keywords", _v2_stemmed_keywords),
    schema.Migration("003_transcript", _v3_user_keys),
]
#: Schema histories of the tables every dimension shares; keys that lead with
#: ``user_id`` so tables distribute by user.
SHARED = {
    **transcript.migrations(
        "seq BIGINT GENERATED ALWAYS AS IDENTITY", "PRIMARY KEY (user_id, seq),"
    ),
    **facts.migrations(),
}
#: Tables of the whole store, not of a user (never partitioned).
STORE_WIDE = copies.migrations()


def _record(row: dict[str, Any]) -> MemoryRecord:
    return MemoryRecord(
        id=row["id"],
        user_id=row["user_id"],
        agent_id=row["agent_id"],
        session_id=row["session_id"],
        content=row["content"],
        content_hash=row["content_hash"],
        memory_type=row["memory_type"],
        importance=row["importance"],
        created_at=row["created_at"].astimezone(timezone.utc),
        accessed_at=row["accessed_at"].astimezone(timezone.utc),
        access_count=row["access_count"],
        metadata=row["metadata"],
        embedding=np.asarray(row["embedding"].to_numpy(), dtype=np.float32),
    )


def _where(user_id: str, flt: MemoryFilter) -> tuple[str, list[object]]:
    """``WHERE`` clause (user first, then the filter) and its parameters."""
    sql = ["user_id = %s"]
    params: list[object] = [user_id]
    if flt.memory_types:
        sql.append("memory_type = ANY(%s)")
        params.append(list(flt.memory_types))
    for column in ("session_id", "agent_id"):
        value = getattr(flt, column)
        if value is not None:
            sql.append(f"{column} = %s")
            params.append(value)
    if flt.created_after is not None:
        sql.append("created_at >= %s")
        params.append(flt.created_after)
    if flt.created_before is not None:
        sql.append("created_at < %s")
        params.append(flt.created_before)
    if flt.metadata:
        sql.append("metadata @> %s::jsonb")
        params.append(json.dumps(dict(flt.metadata)))
    return " AND ".join(sql), params


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Set up each pooled connection: pgvector types, rows as dicts."""
    from pgvector.psycopg import register_vector
    from psycopg.rows import dict_row

    register_vector(conn)
    conn.row_factory = dict_row


def _scalar(c: psycopg.Connection[Any], sql: str, params: list[object]) -> int:
    """The ``n`` column of a one-row count query."""
    row = c.execute(sql, params).fetchone()
    assert row is not None
    return int(row["n"])


DEFAULT_TIMEOUT = 3.0
"""Seconds a call waits for a pooled connection before StoreUnavailableError (503)."""
RECONNECT_WINDOW = 1.0
"""Seconds the pool retries a failed connection on its own; then the next call retries."""


def psycopg_error() -> type[Exception]:
    import psycopg

    return psycopg.Error


def _unavailable(exc: BaseException) -> bool:
    import psycopg
    import psycopg_pool

    return isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout))


def check_partitions(partitions: int) -> int:
    """``partitions`` if it is a partition count (0: not partitioned), else InputError."""
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise InvalidTypeError("partitions", f"expected an int, got {type(partitions).__name__}")
    if not 0 <= partitions <= MAX_PARTITIONS:
        raise InvalidSizeError("partitions", f"is {partitions}", f"use 0 to {MAX_PARTITIONS}")
    return partitions


def _commit_mode(durability: str) -> str:
    """PostgreSQL's ``synchronous_commit`` for a store durability: only ``async_commit``
    acknowledges a write before its WAL is on disk."""
    return "off" if durability == "async_commit" else "on"


class PostgresStore(SQLStore["psycopg.Connection[Any]"]):
    """Long-term memory in PostgreSQL with pgvector.

    Args:
        connection_string: a libpq URI or DSN (``postgresql://user:pass@host/db``).
        dimension: vector width (table ``memories_{dimension}``); defaults to the embedder's.
        embedder: embeds content and queries given without vectors.
        pool_size: most connections held open.
        timeout: seconds a call waits for a connection before
            :class:`StoreUnavailableError` (while PostgreSQL is down, every call fails
            after this long; once it is back, the next call connects).
        exact_max_rows: users with at most this many rows are searched exactly.
        ef_search: HNSW candidate list size for bigger users (recall vs speed).
        durability: ``"committed"`` and ``"synced"`` (a write returns once the server
            flushed its WAL: ``synchronous_commit = on``; it survives a crash of this process,
            of the server, and a power loss) or ``"async_commit"`` (``synchronous_commit =
            off``: faster, and a crash of the server may lose the writes of its last moments).
        partitions: create the tables hash-partitioned by ``user_id`` into this many
            (0: not partitioned); fixed at creation, a database made with another count is
            refused with :class:`PartitionsMismatchError` (:mod:`tiermem.stores.partitions`).
        read_connection_string: a streaming replica of the same database; batches that
            only read run there, read-your-writes kept (:mod:`tiermem.stores.replica`).
        replica_wait: seconds a read waits for the replica to catch up before it reads
            the primary.
        replica_retry: seconds between attempts to reach a replica that stopped.
    """

    p = "%s"
    claim_lock = " FOR UPDATE SKIP LOCKED"
    row_lock = " FOR UPDATE"

    def __init__(
        self,
        connection_string: str,
        *,
        dimension: int | None = None,
        embedder: Embedder | None = None,
        pool_size: int = 4,
        timeout: float = DEFAULT_TIMEOUT,
        exact_max_rows: int = 10_000,
        ef_search: int = 400,
        durability: str = "committed",
        partitions: int = 0,
        read_connection_string: str | None = None,
        replica_wait: float = DEFAULT_WAIT,
        replica_retry: float = DEFAULT_RETRY,
    ) -> None:
        super().__init__(dimension, embedder)
        check_durability(durability)
        self.durability = durability
        self.partitions = check_partitions(partitions)
        psycopg, psycopg_pool = import_driver()

        self.exact_max_rows = exact_max_rows
        self.ef_search = ef_search
        self._counts: dict[str, tuple[int, float]] = {}
        self._counts_lock = threading.Lock()
        connect_args: dict[str, Any] = {
            "prepare_threshold": None,
            "connect_timeout": max(1, int(timeout)),
        }
        # The session default, whatever the server's own: no SET per transaction.
        pool_args = {**connect_args, "options": f"-c synchronous_commit={_commit_mode(durability)}"}
        try:
            with psycopg.connect(connection_string, autocommit=True, **connect_args) as conn:
                ensure_vector(conn)
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"cannot prepare PostgreSQL with pgvector: {exc}") from exc
        self._pool = psycopg_pool.ConnectionPool(
            connection_string,
            min_size=1,
            max_size=pool_size,
            kwargs=pool_args,
            configure=_configure,
            timeout=timeout,
            # an outage: a connection a restart broke is replaced, never handed out, and
            # the pool stops backing off at once, so the next call after it connects
            check=psycopg_pool.ConnectionPool.check_connection,
            reconnect_timeout=RECONNECT_WINDOW,
            open=False,
        )
        self._replica: Replica | None = None
        try:
            self._pool.open(wait=True, timeout=timeout)
            with self._transaction() as conn:
                self._migrate(conn)
            if read_connection_string is not None:
                self._replica = Replica(
                    read_connection_string,
                    pool_size=pool_size,
                    timeout=timeout,
                    wait=replica_wait,
                    retry=replica_retry,
                    configure=_configure,
                    connect_args=connect_args,
                )
        except BaseException:
            self._pool.close()
            raise

    # -- plumbing --

    def close(self) -> None:
        if self._replica is not None:
            self._replica.close()
        self._pool.close()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on a pooled connection; errors roll back and become StoreErrors."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except Exception as exc:
            if _unavailable(exc):
                raise StoreUnavailableError(f"PostgreSQL unavailable: {exc}") from exc
            if isinstance(exc, psycopg_error()):
                raise StoreError(f"PostgreSQL operation failed: {exc}") from exc
            raise

    def _migrate(self, c: psycopg.Connection[Any]) -> None:
        c.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (schema.MIGRATIONS_TABLE,))
        per_user = partitioned({**SHARED, self.table: MIGRATIONS}, self.partitions)
        check_layout(c, list(per_user), self.partitions)  # before: an old table of another layout
        schema.migrate(c, {**per_user, **STORE_WIDE}, self.dimension, "%s")
        check_layout(c, list(per_user), self.partitions)

    def batch(self, ops: Iterable[Op]) -> list[Any]:
        ops = list(ops)
        found = self._on_replica(ops)
        if found is not None:
            return found
        with self._transaction() as conn:
            if self.durability != "async_commit" and all(writes(op) != "write" for op in ops):
                # Reads write only access counts: no need to wait for the WAL flush.
                conn.execute("SET LOCAL synchronous_commit = off")
            return self._run_all(conn, ops)

    def _on_replica(self, ops: list[Op]) -> list[Any] | None:
        """The results of a batch that only reads, read on the replica (the accesses a
        search counts are written on the primary after); None: the primary runs it."""
        reads = None if self._replica is None else replica_reads(ops)
        if self._replica is None or reads is None:
            return None
        results = self._replica.run(reads, self._run_all, self._primary_position)
        counted = [i for i, op in enumerate(ops) if reads[i] is not op]
        if results is None or not counted:
            return results
        with self._transaction() as conn:
            conn.execute("SET LOCAL synchronous_commit = off")
            for i in counted:
                hits = results[i]
                touched = self._touch(conn, [h.record for h in hits])
                results[i] = [
                    SearchResult(r, h.score, h.evidence) for r, h in zip(touched, hits, strict=True)
                ]
        return results

    def _primary_position(self) -> int:
        with self._transaction() as conn:
            return primary_lsn(conn)

    def replica_status(self) -> ReplicaStatus | None:
        """The read replica's state and lag (None: none configured)."""
        return None if self._replica is None else self._replica.status(self._pool.connection)

    # -- writes --

    def _append_all(
        self, c: psycopg.Connection[Any], ops: Sequence[transcript.AppendOp]
    ) -> list[int]:
        """Every row of several appends in one pipelined ``executemany`` (one round trip
        instead of one per message); how many rows each op added."""
        rows = [self._append_rows(op) for op in ops]
        with c.cursor() as cur:
            cur.executemany(self._append_sql(), [r for part in rows for r in part], returning=True)
            added = []
            for part in rows:  # one result per row, in order
                count = 0
                for _ in part:
                    count += max(cur.rowcount, 0)
                    cur.nextset()
                added.append(count)
        return added

    def _lock_user(self, c: psycopg.Connection[Any], user_id: str) -> None:
        """Serialize writers of one user so the content-hash check cannot race."""
        c.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{self.table}:{user_id}",)
        )

    def _existing_hashes(
        self, c: psycopg.Connection[Any], user_id: str, hashes: list[str]
    ) -> dict[str, uuid.UUID]:
        sql = (
            f"SELECT content_hash, id FROM {self.table}"
            " WHERE user_id = %s AND content_hash = ANY(%s)"
        )
        return {r["content_hash"]: r["id"] for r in c.execute(sql, (user_id, hashes))}

    def _insert(
        self, c: psycopg.Connection[Any], user_id: str, records: Sequence[MemoryRecord]
    ) -> None:
        with c.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {self.table} (id, user_id, agent_id, session_id, content,"
                " content_hash, memory_type, importance, created_at, accessed_at,"
                " access_count, metadata, embedding)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        r.id,
                        r.user_id,
                        r.agent_id,
                        r.session_id,
                        r.content,
                        r.content_hash,
                        r.memory_type,
                        r.importance,
                        r.created_at,
                        r.accessed_at,
                        r.access_count,
                        json.dumps(r.metadata),
                        np.asarray(r.embedding, dtype=np.float32),
                    )
                    for r in records
                ],
            )
        self._forget(user_id)

    def _existing_ids(self, c: psycopg.Connection[Any], ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        rows = c.execute(f"SELECT id FROM {self.table} WHERE id = ANY(%s)", (list(ids),))
        return {r["id"] for r in rows}

    def _write_update(self, c: psycopg.Connection[Any], op: UpdateOp, digest: str | None) -> None:
        sets: list[str] = []
        params: list[object] = []
        if digest is not None:
            sets += ["content = %s", "content_hash = %s"]
            params += [op.content, digest]
        if op.embedding is not None:
            sets.append("embedding = %s")
            params.append(op.embedding.astype(np.float32))
        for column in ("memory_type", "importance"):
            if getattr(op, column) is not None:
                sets.append(f"{column} = %s")
                params.append(getattr(op, column))
        if op.metadata is not None:
            sets.append("metadata = %s::jsonb")
            params.append(json.dumps(op.metadata))
        if sets:
            sql = f"UPDATE {self.table} SET {', '.join(sets)} WHERE user_id = %s AND id = %s"
            c.execute(sql, [*params, op.user_id, op.id])

    def _delete(
        self, c: psycopg.Connection[Any], user_id: str, ids: Sequence[uuid.UUID] | None
    ) -> int:
        if ids is None:
            cur = c.execute(f"DELETE FROM {self.table} WHERE user_id = %s", (user_id,))
        else:
            sql = f"DELETE FROM {self.table} WHERE user_id = %s AND id = ANY(%s)"
            cur = c.execute(sql, (user_id, list(ids)))
        self._forget(user_id)
        return cur.rowcount

    def _forget(self, user_id: str) -> None:
        """Drop the user's cached row count (rows were added or deleted)."""
        with self._counts_lock:
            self._counts.pop(user_id, None)

    # -- reads --

    def _by_ids(
        self, c: psycopg.Connection[Any], user_id: str, ids: Sequence[uuid.UUID]
    ) -> list[MemoryRecord]:
        order = {i: n for n, i in enumerate(ids)}
        sql = f"SELECT {_COLUMNS} FROM {self.table} WHERE user_id = %s AND id = ANY(%s)"
        records = [_record(r) for r in c.execute(sql, (user_id, list(order)))]
        return sorted(records, key=lambda r: order[r.id])

    def _list(self, c: psycopg.Connection[Any], op: ListOp) -> list[MemoryRecord]:
        where, params = _where(op.user_id, op.filter)
        sql = (
            f"SELECT {_COLUMNS} FROM {self.table} WHERE {where}"
            " ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s"
        )
        return [_record(r) for r in c.execute(sql, [*params, op.limit, op.offset])]

    def _count(self, c: psycopg.Connection[Any], user_id: str, flt: MemoryFilter) -> int:
        where, params = _where(user_id, flt)
        return _scalar(c, f"SELECT count(*) AS n FROM {self.table} WHERE {where}", params)

    def _scan(
        self,
        c: psycopg.Connection[Any],
        after: uuid.UUID | None,
        limit: int,
        user_id: str | None = None,
    ) -> list[MemoryRecord]:
        mine = "" if user_id is None else " AND user_id = %s"
        sql = f"SELECT {_COLUMNS} FROM {self.table} WHERE id > %s{mine} ORDER BY id LIMIT %s"
        start = after or uuid.UUID(int=0)
        params = (start, *(() if user_id is None else (user_id,)), limit)
        return [_record(r) for r in c.execute(sql, params)]

    def _table_size(self, c: psycopg.Connection[Any]) -> int:
        return _scalar(c, f"SELECT count(*) AS n FROM {self.table}", [])

    def _count_access(
        self,
        c: psycopg.Connection[Any],
        user_id: str,
        ids: Sequence[uuid.UUID],
        now: datetime,
        times: int = 1,
    ) -> int:
        """Add ``times`` to the records' access counts (in the current transaction).

        A batch of reads commits without waiting for the WAL flush (see :meth:`batch`): a
        crash may forget the last few access counts, never data. The table's fillfactor leaves
        room on each page so these updates are HOT and skip the HNSW index (5 ms -> 0.3 ms).
        """
        cursor = c.execute(
            f"UPDATE {self.table} SET access_count = access_count + %s, accessed_at = %s"
            " WHERE user_id = %s AND id = ANY(%s)",
            (times, now, user_id, list(ids)),
        )
        return cursor.rowcount

    def _user_rows(self, c: psycopg.Connection[Any], user_id: str) -> int:
        """The user's row count, cached for a few seconds (it only picks the plan)."""
        now = time.monotonic()
        with self._counts_lock:
            cached = self._counts.get(user_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        sql = f"SELECT count(*) AS n FROM {self.table} WHERE user_id = %s"
        n = _scalar(c, sql, [user_id])
        with self._counts_lock:
            self._counts.pop(user_id, None)
            self._counts[user_id] = (n, now + _COUNT_TTL)
            while len(self._counts) > _COUNTS_MAX:  # insertion order: the oldest first
                del self._counts[next(iter(self._counts))]
        return n

    def _vector_hits(
        self, c: psycopg.Connection[Any], op: SearchOp, limit: int
    ) -> list[SearchResult]:
        where, params = _where(op.user_id, op.filter)
        vec = op.vector
        big = self._user_rows(c, op.user_id) > self.exact_max_rows
        rows: list[dict[str, Any]] = []
        if big and self.dimension <= HNSW_MAX_DIMENSION:
            c.execute(
                "SELECT set_config('hnsw.ef_search', %s, true)", (str(max(self.ef_search, limit)),)
            )
            c.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            sql = (
                f"SELECT id, embedding <=> %s AS dist FROM {self.table}"
                f" WHERE {where} ORDER BY embedding <=> %s LIMIT %s"
            )
            rows = c.execute(sql, [vec, *params, vec, limit]).fetchall()
        if len(rows) < limit:
            # Exact: OFFSET 0 keeps the planner from answering the ORDER BY with HNSW.
            sql = (
                f"SELECT id, dist FROM (SELECT id, embedding <=> %s AS dist FROM {self.table}"
                f" WHERE {where} OFFSET 0) AS mine ORDER BY dist LIMIT %s"
            )
            rows = c.execute(sql, [vec, *params, limit]).fetchall()
        rows.sort(key=lambda r: r["dist"])
        records = {r.id: r for r in self._by_ids(c, op.user_id, [r["id"] for r in rows])}
        return [
            SearchResult(records[r["id"]], 1.0 - float(r["dist"]))
            for r in rows
            if r["id"] in records
        ]

    def _keyword_hits(
        self, c: psycopg.Connection[Any], op: SearchOp, limit: int
    ) -> list[SearchResult]:
        terms = keyword_terms(op.text or "")
        if not terms:
            return []
        where, params = _where(op.user_id, op.filter)
        query = " | ".join(f"'{t}'" for t in terms)  # \w+ tokens: no quotes or operators
        if self._user_rows(c, op.user_id) <= self.exact_max_rows:
            # A small user's rows through the user_id btree, then matched: the GIN index
            # would read every user's postings of the terms (its cost grows with the
            # store; OFFSET 0 keeps the planner from choosing it).
            sql = (
                f"SELECT {_COLUMNS}, ts_rank_cd(tsv, q) AS rank"
                f" FROM (SELECT {_COLUMNS}, tsv FROM {self.table} WHERE {where} OFFSET 0)"
                " AS mine, to_tsquery('english', %s) AS q"
                " WHERE tsv @@ q ORDER BY rank DESC, id LIMIT %s"
            )
            rows = c.execute(sql, [*params, query, limit]).fetchall()
        else:
            sql = (
                f"SELECT {_COLUMNS}, ts_rank_cd(tsv, q) AS rank"
                f" FROM {self.table}, to_tsquery('english', %s) AS q"
                f" WHERE tsv @@ q AND {where} ORDER BY rank DESC, id LIMIT %s"
            )
            rows = c.execute(sql, [query, *params, limit]).fetchall()
        return [SearchResult(_record(r), float(r["rank"])) for r in rows]

    def _stats(self, c: psycopg.Connection[Any], user_id: str) -> StoreStats:
        row = c.execute(
            f"SELECT count(*) AS n, min(created_at) AS oldest, max(created_at) AS newest,"
            f" coalesce(sum(access_count), 0) AS access, avg(importance) AS importance"
            f" FROM {self.table} WHERE user_id = %s",
            (user_id,),
        ).fetchone()
        assert row is not None
        by_type = c.execute(
            f"SELECT memory_type, count(*) AS n FROM {self.table}"
            " WHERE user_id = %s GROUP BY memory_type",
            (user_id,),
        )
        return StoreStats(
            count=row["n"],
            by_type={r["memory_type"]: r["n"] for r in by_type},
            oldest=row["oldest"],
            newest=row["newest"],
            total_access_count=int(row["access"]),
            mean_importance=None if row["importance"] is None else float(row["importance"]),
        )
