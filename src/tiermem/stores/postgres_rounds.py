"""A batch of reads in one round trip, its rows decoded a column at a time (PostgreSQL,
native async: a context's reads, in the thread that then plans it).

The batch's plans run side by side (:class:`~.plans.Lockstep`): each round's statements
go to the server pipelined, in one round trip, on a pooled connection of the calling
thread. Its rows are then made (psycopg's C loaders, JSON and vectors as bytes) and
decoded a column at a time (one ``json.loads`` and one ``numpy`` conversion per column:
the same values as the row-at-a-time loaders), shaped by their plans and handed to the
caller's ``then``.

Not on the event loop: received there, a context's results (about 230 rows, 0.3 MB with
the vector search's vectors) woke the loop about 30 times, each wake-up a pass through
psycopg's async waiting and the whole chain of awaiting coroutines, and the loop thread,
which also speaks HTTP for every request, was then the server's bottleneck on busy
cores (docs/notes/2026-11-28-server.md). A thread waits for the socket in psycopg's C loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NamedTuple, TypeVar

import numpy as np

from tiermem.stores.plans import Lockstep, Query, Setting

T = TypeVar("T")

JSONB = 3802
"""The oid of ``jsonb`` (built in)."""
RELAXED = "SET LOCAL synchronous_commit = off"
"""A batch that writes only access counts need not wait for the WAL flush (see
:func:`~tiermem.stores.sql.relaxed_commit`)."""


class Raw(NamedTuple):
    """A statement's result as received: each column's (name, type oid), and psycopg's
    transformer holding the result, which makes its rows (C loaders; JSON and vectors as
    bytes) in whichever thread asks: not on the loop when there are many."""

    columns: list[tuple[str, int]]
    transformer: Any

    @property
    def ntuples(self) -> int:
        return int(self.transformer.pgresult.ntuples)

    def rows(self) -> list[tuple[Any, ...]]:
        return list(self.transformer.load_rows(0, self.ntuples, tuple))


def run_then(
    connection: Callable[[], AbstractContextManager[Any]],
    lockstep: Lockstep,
    relaxed: bool,
    then: Callable[[list[Any]], T],
) -> T:
    """``then(results)`` of ``lockstep``'s plans, in the calling thread, on connections of
    ``connection()`` in autocommit while the rounds run (``relaxed``: each of the batch's
    transactions commits without waiting for the WAL flush).

    A round's statements go in one pipeline, the implicit transaction of its sync; a
    round that holds a :class:`~.plans.Setting` opens a transaction the next round ends,
    so the setting reaches the statement that needs it (one round trip per round either
    way). A round with more than single rows returns its connection before its rows are
    made and shaped, so no connection waits for the decoding; if the plans then ask for
    another round, it runs on a connection taken anew (at READ COMMITTED each statement
    reads its own snapshot anyway)."""
    while True:
        with connection() as conn, _autocommit(conn):
            vector = conn.adapters.types["vector"].oid
            fetched = _rounds(conn, lockstep, relaxed, vector)
        if fetched is not None:
            lockstep.send({i: _decoded(f, vector) for i, f in fetched.items()})
        if not lockstep.steps:
            return then(lockstep.results)


@contextmanager
def _autocommit(conn: Any) -> Iterator[None]:
    """``conn`` in autocommit within the block; after a failure its transaction is rolled
    back, so the pool gets the connection back as it lent it (one that cannot be rolled
    back is closed: the pool replaces it)."""
    import psycopg
    from psycopg.pq import TransactionStatus

    conn.autocommit = True
    try:
        yield
    finally:
        if not conn.closed:
            try:
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.rollback()
                conn.autocommit = False
            except psycopg.Error:
                conn.close()


def _rounds(conn: Any, lockstep: Lockstep, relaxed: bool, vector: int) -> dict[int, Any] | None:
    """Rounds of ``lockstep`` on ``conn`` until one fetches more than single rows (its
    :class:`Raw` rows, its transaction ended) or the plans are done (None)."""
    open_ = False
    while True:
        setting = any(isinstance(step, Setting) for step in lockstep.steps.values())
        before: list[Query] = []
        if (setting or relaxed) and not open_:  # a transaction of its own (else implicit)
            before += [("BEGIN", ()), (RELAXED, ())] if relaxed else [("BEGIN", ())]
            open_ = True
        after: list[Query] = []
        if open_ and not setting:
            after.append(("COMMIT", ()))
            open_ = False
        fetched = _round(conn, lockstep.steps, before, after, vector)
        if not setting and any(isinstance(f, Raw) and f.ntuples > 1 for f in fetched.values()):
            return fetched
        lockstep.send({i: _decoded(f, vector) for i, f in fetched.items()})
        if not lockstep.steps:
            if open_:
                conn.execute("COMMIT")
            return None


def _round(
    conn: Any,
    steps: Mapping[int, Query],
    before: Sequence[Query],
    after: Sequence[Query],
    vector: int,
) -> dict[int, Any]:
    """Each step's :class:`Raw` rows (or row count), the steps sent in one round trip
    between the statements ``before`` and ``after`` (without rows)."""
    from psycopg.adapt import Transformer
    from psycopg.types.string import ByteaBinaryLoader

    cursors = {}
    with conn.pipeline():
        for sql, params in before:
            conn.execute(sql, params)
        for i, (sql, params) in steps.items():
            cursor = conn.cursor()
            for oid in (JSONB, vector):  # as bytes: decoded a column at a time after
                cursor.adapters.register_loader(oid, ByteaBinaryLoader)
            cursor.execute(sql, params, binary=True)
            cursors[i] = cursor
        for sql, params in after:
            conn.execute(sql, params)
    fetched: dict[int, Any] = {}
    for i, cursor in cursors.items():
        result = cursor.pgresult  # its columns read directly: no Column objects
        if result is None or not result.nfields:
            fetched[i] = cursor.rowcount
            continue
        encoding = conn.info.encoding
        columns = [
            (result.fname(k).decode(encoding), result.ftype(k)) for k in range(result.nfields)
        ]
        transformer = Transformer(cursor)
        transformer.set_pgresult(result)
        fetched[i] = Raw(columns, transformer)
    return fetched


def _decoded(fetched: Any, vector: int) -> Any:
    """A statement's rows as dicts (JSON and vectors decoded), or its row count."""
    if not isinstance(fetched, Raw):
        return fetched
    rows = fetched.rows()
    if not rows:
        return []
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for k, (_, oid) in enumerate(fetched.columns):
        if oid == JSONB:
            columns[k] = _json_column(columns[k])
        elif oid == vector:
            columns[k] = _vector_column(columns[k])
    names = [name for name, _ in fetched.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def _json_column(values: Sequence[bytes | None]) -> list[Any]:
    """Binary ``jsonb`` values (a version byte, then the text), parsed in one call."""
    if any(v is not None and v[:1] != b"\x01" for v in values):
        raise ValueError("unknown jsonb binary format version")
    parts = [b"null" if v is None else v[1:] for v in values]
    return list(json.loads(b"[" + b",".join(parts) + b"]"))


def _vector_column(values: Sequence[bytes | None]) -> list[Any]:
    """Binary pgvector values (dimension and a reserved int16, then big-endian float4s)
    as float32 arrays, all of one column converted at once."""
    width = len(values[0]) if values[0] is not None else -1
    if width < 4 or any(v is None or len(v) != width for v in values):
        return [None if v is None else _vector(v) for v in values]
    matrix = np.frombuffer(b"".join(values), dtype=">f4")  # type: ignore[arg-type]
    return list(matrix.reshape(len(values), width // 4)[:, 1:].astype(np.float32))


def _vector(value: bytes) -> np.ndarray:
    return np.frombuffer(value, dtype=">f4", offset=4).astype(np.float32)
