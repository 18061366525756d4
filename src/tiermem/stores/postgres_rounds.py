"""A batch of reads whose rows are decoded off the event loop (PostgreSQL, native async).

An async read that decodes its rows on the event loop holds up every other request's
statements meanwhile: a context reads about 230 rows (the vector search's pool with its
vectors and JSON metadata), and decoding them was most of the loop's time per context
(docs/benchmarks.md). Here the batch's plans run side by side (:class:`~.plans.Lockstep`):
each round's statements go to the server pipelined, in one round trip, and the loop
only receives their results. A thread then makes the rows (psycopg's C loaders, JSON and
vectors as bytes), decodes those a column at a time (one ``json.loads`` and one
``numpy`` conversion per column: the same values as the row-at-a-time loaders), shapes
them by their plans and hands the results to the caller's ``then``. A round of single
rows (a row count, a setting) goes back to its plans on the loop, with no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, TypeVar, cast

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


async def arun_then(
    connection: Callable[[], AbstractAsyncContextManager[Any]],
    lockstep: Lockstep,
    relaxed: bool,
    then: Callable[[list[Any]], T],
) -> T:
    """``then(results)`` of ``lockstep``'s plans, on autocommit connections of
    ``connection()`` (``relaxed``: each of the batch's transactions commits without
    waiting for the WAL flush).

    A round's statements go in one pipeline, the implicit transaction of its sync; a
    round that holds a :class:`~.plans.Setting` opens a transaction the next round ends,
    so the setting reaches the statement that needs it (one round trip per round either
    way). A round with more than single rows returns its connection before a thread
    shapes them, so no connection waits for a thread; if the plans then ask for another
    round, it runs on a connection taken anew (at READ COMMITTED each statement reads its
    own snapshot anyway)."""
    while True:
        async with connection() as conn:
            vector = conn.adapters.types["vector"].oid
            try:
                fetched = await _rounds(conn, lockstep, relaxed, vector)
            except BaseException:
                await _rollback(conn)
                raise
        if fetched is None:  # every round was single rows, shaped on the loop
            return await asyncio.to_thread(then, lockstep.results)
        done = await asyncio.to_thread(_shape_then, lockstep, fetched, vector, then)
        if done is not _MORE:
            return cast(T, done)


async def _rounds(
    conn: Any, lockstep: Lockstep, relaxed: bool, vector: int
) -> dict[int, Any] | None:
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
        fetched = await _round(conn, lockstep.steps, before, after)
        if not setting and any(isinstance(f, Raw) and f.ntuples > 1 for f in fetched.values()):
            return fetched
        lockstep.send({i: _decoded(f, vector) for i, f in fetched.items()})
        if not lockstep.steps:
            if open_:
                await conn.execute("COMMIT")
            return None


_MORE = object()
"""What :func:`_shape_then` returns when the plans asked for another round."""


def _shape_then(
    lockstep: Lockstep, fetched: Mapping[int, Any], vector: int, then: Callable[[list[Any]], T]
) -> Any:
    lockstep.send({i: _decoded(f, vector) for i, f in fetched.items()})
    return _MORE if lockstep.steps else then(lockstep.results)


async def _round(
    conn: Any, steps: Mapping[int, Query], before: Sequence[Query], after: Sequence[Query]
) -> dict[int, Any]:
    """Each step's :class:`Raw` rows (or row count), the steps sent in one round trip
    between the statements ``before`` and ``after`` (without rows)."""
    from psycopg.adapt import Transformer
    from psycopg.types.string import ByteaBinaryLoader

    vector = conn.adapters.types["vector"].oid
    cursors = {}
    async with conn.pipeline():
        for sql, params in before:
            await conn.execute(sql, params)
        for i, (sql, params) in steps.items():
            cursor = conn.cursor()
            for oid in (JSONB, vector):  # as bytes: decoded a column at a time in the thread
                cursor.adapters.register_loader(oid, ByteaBinaryLoader)
            await cursor.execute(sql, params, binary=True)
            cursors[i] = cursor
        for sql, params in after:
            await conn.execute(sql, params)
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
        transformer = Transformer(cursor)  # its loaders made here, on the loop
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


async def _rollback(conn: Any) -> None:
    """End a failed batch's transaction if the connection still can (the pool discards a
    broken one)."""
    import psycopg

    if not conn.closed:
        with contextlib.suppress(psycopg.Error):
            await conn.rollback()
