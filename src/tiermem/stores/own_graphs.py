"""A big user's own HNSW graph on PostgreSQL: a partial index ``WHERE user_id = ...``.

A user's vector search walks the HNSW graph of their partition (or of the whole table,
unpartitioned) with the user's filter, so it visits other users' rows too: measured with a
100k-message user, 99.7% of its partition in a 100k-message store and 57% in a 1M-message
one, the scan removed 474 other users' rows to find the user's 200 nearest and read 11,500
buffers instead of 7,000 (docs/notes/2026-12-02-scale.md, "Where the growth comes from"). A partial
index holding only the user's rows makes the search the same at any store size; the
planner picks it for the store's own statement (the user id is a bound value, planned
with it). The same user gets a GIN index of their own words (``tsv``, partial the same
way): their keyword search, when the terms that choose its matches are rare
(:mod:`.common_terms`), reads the matches through it rather than through the partition's
GIN, whose other users' matches it would fetch and drop (a share that grows with the
store).

:class:`OwnGraphs` builds one, once per user and process, when a vector search sees a user
with at least ``rows`` rows: on a thread of its own, with its own connection, ``CREATE
INDEX CONCURRENTLY`` on the user's partition (writes go on meanwhile; searches use the
partition's graph until it is ready). A session advisory lock on the index's name makes
one builder per index across processes; the holder drops a leftover invalid index (a
build that was stopped) and builds it again. :meth:`OwnGraphs.close` cancels builds in
progress (the next process rebuilds them).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

OWN_GRAPH_ROWS = 50_000
"""Rows from which a user gets a graph of their own (0: never)."""
GRAPH_MEMORY_MB = (64, 1024)
"""Bounds of ``maintenance_work_mem`` for a build: the graph in memory (a graph that
outgrows it is built several times slower), never more than 1 GB of the server's."""


def graph_name(table: str, user_id: str) -> str:
    """The name of ``user_id``'s own graph on ``table`` (within PostgreSQL's 63 bytes)."""
    return f"{table}_own_{hashlib.sha256(user_id.encode()).hexdigest()[:16]}"


HNSW = "hnsw (embedding vector_cosine_ops)"
"""How a user's own graph is built."""


def keywords_name(table: str, user_id: str) -> str:
    """The name of ``user_id``'s own GIN index of words on ``table``."""
    return f"{table}_ownk_{hashlib.sha256(user_id.encode()).hexdigest()[:16]}"


def graph_memory_mb(rows: int, dimension: int) -> int:
    """``maintenance_work_mem`` for a graph of ``rows`` vectors: the vectors and their
    neighbour lists, within :data:`GRAPH_MEMORY_MB`."""
    low, high = GRAPH_MEMORY_MB
    return max(low, min(high, rows * (4 * dimension + 800) // 2**20 + 1))


class OwnGraphs:
    """Builds big users' own graphs of one ``memories_{dim}`` table in the background."""

    def __init__(
        self, connection_string: str, connect_args: dict[str, Any], table: str, dimension: int
    ) -> None:
        self.connection_string = connection_string
        self.connect_args = connect_args
        self.table = table
        self.dimension = dimension
        self._seen: set[str] = set()
        self._building: dict[str, Any] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def want(self, user_id: str, rows: int) -> None:
        """Start building ``user_id``'s graph unless this process already did (or tried)."""
        with self._lock:
            if self._closed or user_id in self._seen:
                return
            self._seen.add(user_id)
            thread = threading.Thread(
                target=self._build_logged,
                args=(user_id, rows),
                name="tiermem-own-graph",
                daemon=True,
            )
            self._threads.append(thread)
        thread.start()

    def drop(self, conn: Any, user_id: str) -> None:
        """Drop ``user_id``'s graph in ``conn``'s transaction, after their rows were
        deleted: its definition names the user, so a forgotten user's graph must go with
        their rows (it locks their partition until the transaction commits; a user with no
        graph locks nothing). A later search builds it again if they grow back."""
        from psycopg import sql

        with self._lock:
            self._seen.discard(user_id)
        for name in (graph_name(self.table, user_id), keywords_name(self.table, user_id)):
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the builds started so far; whether all ended within ``timeout``."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)
        return not any(t.is_alive() for t in threads)

    def close(self) -> None:
        """Cancel the builds in progress (an invalid index stays, rebuilt by the next
        builder) and start no more."""
        with self._lock:
            self._closed = True
            building = list(self._building.values())
        for conn in building:
            try:
                conn.cancel_safe()
            except Exception as exc:  # a connection that just ended: nothing to cancel
                log.debug("cancelling an own graph's build: %s", exc)
        self.wait(5.0)

    def _build_logged(self, user_id: str, rows: int) -> None:
        try:
            self.build(user_id, rows)
        except Exception as exc:  # a failed build leaves the partition's graph: searches work
            log.warning("building the own graph of a user failed: %s", exc)

    def build(self, user_id: str, rows: int) -> bool:
        """Build ``user_id``'s graph, then their GIN index of words, each unless it exists
        or another builder holds it; whether this call built the graph."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.connection_string, autocommit=True, **self.connect_args) as conn:
            with self._lock:
                if self._closed:
                    return False
                self._building[user_id] = conn
            try:
                memory = sql.Literal(f"{graph_memory_mb(rows, self.dimension)}MB")
                conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(memory))
                part = _partition(conn, self.table, user_id)
                if part is None:
                    return False
                graph = _create(conn, graph_name(self.table, user_id), part, user_id, HNSW)
                _create(conn, keywords_name(self.table, user_id), part, user_id, "gin (tsv)")
                return graph
            finally:
                with self._lock:
                    self._building.pop(user_id, None)


def _claim(conn: Any, name: str) -> bool:
    """Whether this connection is to build index ``name``: it holds the builder's lock (a
    session advisory lock, released with the connection) and no valid index has the name
    (a stopped build's invalid leftover is dropped)."""
    from psycopg import sql

    locked = conn.execute(
        "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (name,)
    ).fetchone()
    if not locked[0]:
        return False  # another process builds it
    valid = conn.execute(
        "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
        " WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace",
        (name,),
    ).fetchone()
    if valid is not None and valid[0]:
        return False
    if valid is not None:
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
    return True


def _create(conn: Any, name: str, part: str, user_id: str, using: str) -> bool:
    """Build index ``name`` on ``user_id``'s rows of ``part`` ``USING using`` unless it
    exists or another builder holds it (:func:`_claim`); whether this call built it."""
    from psycopg import sql

    if not _claim(conn, name):
        return False
    create = "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} USING " + using
    conn.execute(
        sql.SQL(create + " WHERE user_id = {}").format(
            sql.Identifier(name), sql.Identifier(part), sql.Literal(user_id)
        )
    )
    return True


def _partition(conn: Any, table: str, user_id: str) -> str | None:
    """The table holding ``user_id``'s rows of ``table`` (its partition, or itself when
    not partitioned); None when the user has none."""
    row = conn.execute(
        f"SELECT c.relname FROM pg_class c"
        f" WHERE c.oid = (SELECT tableoid FROM {table} WHERE user_id = %s LIMIT 1)",
        (user_id,),
    ).fetchone()
    return None if row is None else str(row[0])
