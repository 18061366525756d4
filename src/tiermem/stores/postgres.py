"""PostgresStore: long-term memory on PostgreSQL + pgvector (HNSW, btree, tsvector GIN).

Per-user vector search picks its plan by the user's row count, because neither plan is
right for every user (measured on pgvector 0.8.5, docs/stores.md):

* up to ``exact_max_rows`` rows: an exact scan of the user's rows through the btree on
  ``user_id`` (recall 1.0, under a millisecond for 1k rows). The planner's own choice,
  HNSW then filter, returns too few rows for a small user.
* bigger users: the HNSW index with ``hnsw.iterative_scan = relaxed_order`` and
  ``hnsw.ef_search``; if it still returns fewer rows than asked while the user has
  more, the exact plan answers instead. A user with ``own_graph_rows`` rows or more gets
  an HNSW graph of their own, built in the background (:mod:`.own_graphs`), so their
  search stops walking other users' rows.

Connections come from a psycopg_pool with ``prepare_threshold=None``: a prepared plan
would not see the per-transaction ``SET LOCAL`` of the search settings.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import tiermem.stores.copies as copies
import tiermem.stores.facts as facts
import tiermem.stores.schema as schema
import tiermem.stores.transcript as transcript
from tiermem.errors import InvalidSizeError, InvalidTypeError, StoreError, StoreUnavailableError
from tiermem.stores.common_terms import CommonTerms
from tiermem.stores.dialect import insert_sql, record_values, update_sets
from tiermem.stores.index_sql import IndexSQL
from tiermem.stores.ops import Op, UpdateOp
from tiermem.stores.own_graphs import OWN_GRAPH_ROWS, OwnGraphs
from tiermem.stores.partitions import MAX_PARTITIONS, adopted, check_layout, partitioned
from tiermem.stores.pgsetup import ensure_vector, import_driver, pool_options
from tiermem.stores.plans import Lockstep, arun, run
from tiermem.stores.postgres_async import AsyncPools
from tiermem.stores.postgres_plans import COLUMNS as _COLUMNS
from tiermem.stores.postgres_plans import (
    COUNT_TTL,
    COUNTS_MAX,
    DIALECT,
    HNSW_MAX_DIMENSION,
    PostgresPlans,
    count_of,
)
from tiermem.stores.postgres_rounds import RELAXED, run_then
from tiermem.stores.records import ReplicaStatus
from tiermem.stores.replica import (
    DEFAULT_RETRY,
    DEFAULT_WAIT,
    Replica,
    primary_lsn,
    replica_reads,
)
from tiermem.stores.sql import SQLStore, handler, relaxed_commit
from tiermem.stores.transcript_sql import TranscriptSQL
from tiermem.stores.user_cache import UserCache
from tiermem.stores.validate import check_durability
from tiermem.types.records import MemoryRecord, SearchResult, StoreStats

if TYPE_CHECKING:
    import psycopg

    from tiermem.embeddings.base import Embedder

T = TypeVar("T")
R = TypeVar("R")

#: Characters of content indexed for keyword search (a tsvector holds at most 1 MB).
TSV_MAX_CHARS = 200_000


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


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Set up each pooled connection: pgvector types, rows as dicts."""
    from pgvector.psycopg import register_vector
    from psycopg.rows import dict_row

    register_vector(conn)
    conn.row_factory = dict_row


def _scalar(c: psycopg.Connection[Any], sql: str, params: list[object]) -> int:
    """The ``n`` column of a one-row count query."""
    return count_of(c.execute(sql, params).fetchall())


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


def check_partitions(partitions: int | None) -> int | None:
    """``partitions`` if it is a partition count (0: not partitioned) or None (the
    store's own layout), else InputError."""
    if partitions is None:
        return None
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise InvalidTypeError("partitions", f"expected an int, got {type(partitions).__name__}")
    if not 0 <= partitions <= MAX_PARTITIONS:
        raise InvalidSizeError("partitions", f"is {partitions}", f"use 0 to {MAX_PARTITIONS}")
    return partitions


def _broken(exc: StoreUnavailableError) -> bool:
    """Whether the batch failed on a connection that broke (not waiting for one)."""
    import psycopg
    import psycopg_pool

    cause = exc.__cause__
    return isinstance(cause, psycopg.OperationalError) and not isinstance(
        cause, psycopg_pool.PoolTimeout
    )


def _commit_mode(durability: str) -> str:
    """PostgreSQL's ``synchronous_commit`` for a store durability: only ``async_commit``
    acknowledges a write before its WAL is on disk."""
    return "off" if durability == "async_commit" else "on"


@contextmanager
def _store_errors() -> Iterator[None]:
    """The driver's and pool's exceptions raised as the StoreErrors they stand for."""
    try:
        yield
    except Exception as exc:
        if _unavailable(exc):
            raise StoreUnavailableError(f"PostgreSQL unavailable: {exc}") from exc
        if isinstance(exc, psycopg_error()):
            raise StoreError(f"PostgreSQL operation failed: {exc}") from exc
        raise


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
        own_graph_rows: a user with at least this many rows gets an HNSW graph of their
            own (a partial index, built in the background the first time a search sees
            them: :mod:`tiermem.stores.own_graphs`); 0: never.
        durability: ``"committed"`` and ``"synced"`` (a write returns once the server
            flushed its WAL: ``synchronous_commit = on``; it survives a crash of this process,
            of the server, and a power loss) or ``"async_commit"`` (``synchronous_commit =
            off``: faster, and a crash of the server may lose the writes of its last moments).
        partitions: create the tables hash-partitioned by ``user_id`` into this many
            (0: not partitioned); fixed at creation, a database made with another count is
            refused with :class:`PartitionsMismatchError` (:mod:`tiermem.stores.partitions`).
            None (the default): an existing store opens with its own layout, a new one is
            made with ``DEFAULT_PARTITIONS`` (16); :attr:`partitions` is then the count
            in effect.
        read_connection_string: a streaming replica of the same database; batches that
            only read run there, read-your-writes kept (:mod:`tiermem.stores.replica`).
        replica_wait: seconds a read waits for the replica to catch up before it reads
            the primary.
        replica_retry: seconds between attempts to reach a replica that stopped.
        native_async: :meth:`abatch` runs reads (every op with a plan: the reads of a
            context, search, get, list, count, sessions) on an async connection pool of
            its event loop, as many connections as ``pool_size``; writes go to the sync
            pool in a thread, and so do reads when a replica is configured (its routing
            and read-your-writes wait are the sync path's). False: everything in a
            thread (the baseline of ``benchmarks/server.py``).
    """

    plan_options: ClassVar[dict[str, Any]] = {"binary": True}
    """Rows of reads come in binary: a vector is a buffer, not 384 numbers to parse in
    Python (a third of a context's time in text)."""

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
        own_graph_rows: int = OWN_GRAPH_ROWS,
        durability: str = "committed",
        partitions: int | None = None,
        read_connection_string: str | None = None,
        replica_wait: float = DEFAULT_WAIT,
        replica_retry: float = DEFAULT_RETRY,
        native_async: bool = True,
    ) -> None:
        super().__init__(dimension, embedder)
        self.native_async = bool(native_async)
        check_durability(durability)
        self.durability = durability
        self._partitions_setting = check_partitions(partitions)
        self.partitions = 0
        """The store's partitions (0: not partitioned), known once it is open."""
        psycopg, psycopg_pool = import_driver()

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
            # an outage: a connection a restart broke is replaced, never handed out, and
            # the pool stops backing off at once, so the next call after it connects
            check=psycopg_pool.ConnectionPool.check_connection,
            **pool_options(pool_size, pool_args, _configure, timeout, RECONNECT_WINDOW),
        )
        self.own_graphs = (
            OwnGraphs(connection_string, connect_args, self.table, self.dimension)
            if own_graph_rows > 0 and self.dimension <= HNSW_MAX_DIMENSION
            else None
        )
        """Big users' own graphs, built in the background (None: never)."""
        self._postgres = PostgresIndex(self, exact_max_rows, ef_search, own_graph_rows)
        self._hold(self._postgres, PostgresTranscript)
        self._replica: Replica | None = None
        self._apools = AsyncPools(
            connection_string, pool_size, pool_args, timeout, RECONNECT_WINDOW
        )
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
        if self.own_graphs is not None:
            self.own_graphs.close()
        if self._replica is not None:
            self._replica.close()
        self._apools.close()
        self._pool.close()

    async def aclose(self) -> None:
        """Close this event loop's async pool, then the store (see :meth:`close`)."""
        await self._apools.aclose()
        await asyncio.to_thread(self.close)

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on a pooled connection; errors roll back and become StoreErrors."""
        with _store_errors(), self._pool.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def _atransaction(self) -> AsyncIterator[Any]:
        """:meth:`_transaction` on this event loop's async pool."""
        with _store_errors():
            async with self._apools.connection() as conn, conn.transaction():
                yield conn

    def _migrate(self, c: psycopg.Connection[Any]) -> None:
        c.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (schema.MIGRATIONS_TABLE,))
        histories = {**SHARED, self.table: MIGRATIONS}
        # under the lock: a process making the same new store waits, then adopts it
        self.partitions = adopted(c, list(histories), self._partitions_setting)
        per_user = partitioned(histories, self.partitions)
        check_layout(c, list(per_user), self.partitions)  # before: an old table of another layout
        schema.migrate(c, {**per_user, **STORE_WIDE}, self.dimension, "%s")
        check_layout(c, list(per_user), self.partitions)

    def batch(self, ops: Iterable[Op]) -> list[Any]:
        ops = list(ops)
        found = self._on_replica(ops)
        if found is not None:
            return found
        with self._transaction() as conn:
            if relaxed_commit(ops, self.durability):
                conn.execute(RELAXED)
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
                touched = run(conn, self._postgres.touch_plan([h.record for h in hits]))
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

    async def abatch(self, ops: Iterable[Op]) -> list[Any]:
        """Async twin of :meth:`batch`: reads natively, on this loop's async pool, when
        every op has a plan (the same plans :meth:`batch` runs); a batch with a write
        (or with ``native_async`` off) runs :meth:`batch` in a thread."""
        ops = list(ops)
        if not self._reads_natively(ops):
            return await asyncio.to_thread(self.batch, ops)
        return await self._retried(self._aread, ops)

    async def abatch_then(self, ops: Iterable[Op], then: Callable[[list[Any]], T]) -> T:
        """``then(results)`` of a batch, in a thread (a context's reads, then its ranking
        and planning). Natively (as :meth:`abatch`): that thread sends the plans'
        statements pipelined, a round trip per step, on a pooled connection, then decodes
        and shapes their rows and calls ``then`` (:mod:`.postgres_rounds`), while the event
        loop answers other requests; else ``then(batch(ops))`` in a thread."""
        ops = list(ops)
        if not self._reads_natively(ops):
            return await super().abatch_then(ops, then)
        return await asyncio.to_thread(self._read_then, ops, then)

    def _reads_natively(self, ops: list[Op]) -> bool:
        """Whether ``ops`` are read natively: each has a plan, and no replica is
        configured (replica reads: ``batch`` in a thread)."""
        native = self.native_async and self._replica is None
        return native and all(handler(op).plan for op in ops)

    async def _retried(self, read: Callable[[list[Op]], Awaitable[R]], ops: list[Op]) -> R:
        try:
            return await read(ops)
        except StoreUnavailableError as exc:
            if not _broken(exc):
                raise
        await self._apools.recheck()  # a restart broke idle connections: replace them
        return await read(ops)  # reads: running them again is safe

    def _read_then(self, ops: list[Op], then: Callable[[list[Any]], T]) -> T:
        if not ops:
            return then([])
        relaxed = relaxed_commit(ops, self.durability)
        lockstep = Lockstep(self._plan(op) for op in ops)
        with _store_errors():
            return run_then(self._pool.connection, lockstep, relaxed, then)

    async def _aread(self, ops: list[Op]) -> list[Any]:
        async with self._atransaction() as conn:
            if relaxed_commit(ops, self.durability):
                await conn.execute(RELAXED)
            return [await arun(conn, self._plan(op), **self.plan_options) for op in ops]


class PostgresTranscript(TranscriptSQL):
    """The transcript's SQL on PostgreSQL: several appends in one round trip."""

    def append_all(
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


class PostgresIndex(PostgresPlans, IndexSQL["psycopg.Connection[Any]"]):
    """The memory index's SQL on PostgreSQL: its reads are :class:`PostgresPlans`; the
    settings of its vector search are the store's (see :class:`PostgresStore`)."""

    columns = _COLUMNS

    def __init__(
        self, store: PostgresStore, exact_max_rows: int, ef_search: int, own_graph_rows: int
    ) -> None:
        super().__init__(store, DIALECT)
        self.dimension = store.dimension
        self.exact_max_rows = exact_max_rows
        self.ef_search = ef_search
        self.own_graph_rows = own_graph_rows
        self.own_graphs = store.own_graphs
        self._counts: UserCache[int] = UserCache(COUNT_TTL, COUNTS_MAX)
        self.common_terms = CommonTerms(self.table)
        """Big users' common words: which query terms choose their keyword matches."""

    def lock_user(self, c: psycopg.Connection[Any], user_id: str) -> None:
        """Serialize writers of one user so the content-hash check cannot race."""
        c.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{self.table}:{user_id}",)
        )

    def existing_hashes(
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
                insert_sql(self.table, DIALECT), [record_values(r, DIALECT) for r in records]
            )
        self._forget(user_id)

    def _existing_ids(self, c: psycopg.Connection[Any], ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        rows = c.execute(f"SELECT id FROM {self.table} WHERE id = ANY(%s)", (list(ids),))
        return {r["id"] for r in rows}

    def write_update(self, c: psycopg.Connection[Any], op: UpdateOp, digest: str | None) -> None:
        sets, params = update_sets(op, digest, DIALECT)
        if sets:
            sql = f"UPDATE {self.table} SET {sets} WHERE user_id = %s AND id = %s"
            c.execute(sql, [*params, op.user_id, op.id])

    def delete_rows(
        self, c: psycopg.Connection[Any], user_id: str, ids: Sequence[uuid.UUID] | None
    ) -> int:
        if ids is None:
            cur = c.execute(f"DELETE FROM {self.table} WHERE user_id = %s", (user_id,))
            if self.own_graphs is not None:
                self.own_graphs.drop(c, user_id)
            self.common_terms.forget(user_id)
        else:
            sql = f"DELETE FROM {self.table} WHERE user_id = %s AND id = ANY(%s)"
            cur = c.execute(sql, (user_id, list(ids)))
        self._forget(user_id)
        return cur.rowcount

    def _forget(self, user_id: str) -> None:
        """Drop the user's cached row count (rows were added or deleted)."""
        self._counts.forget(user_id)

    def _table_size(self, c: psycopg.Connection[Any]) -> int:
        return _scalar(c, f"SELECT count(*) AS n FROM {self.table}", [])

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
