"""The native async store reads (PostgreSQL's ``abatch`` on an async pool, ``abatch_then``
in pipelined rounds from a thread): the same results and errors as ``batch`` for every
planned op, on every engine; an outage gives the same StoreUnavailableError, and the
first call after it succeeds."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, suppress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

import tiermem.stores.transcript as tr
from tiermem.errors import InputError, StoreUnavailableError
from tiermem.messages import Message
from tiermem.stores.ops import CountOp, GetOp, ListOp, Op, SearchOp
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.queue import WorkStatsOp
from tiermem.stores.sql import handler
from tiermem.types.filters import MemoryFilter

DIM = 8


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _seeded(store: MemoryStore, user: str) -> list[uuid.UUID]:
    texts = ["the cat sleeps on the sofa", "tea with lemon", "a red bicycle", "cats and dogs"]
    ids = store.index.add_many(user, texts, embeddings=np.stack([_vector(i) for i in range(4)]))
    store.transcript.append(
        user, "s1", [Message("user", f"message {i} about cats") for i in range(5)]
    )
    return ids


def _reads(user: str, ids: list[uuid.UUID]) -> list[Op]:
    """One of each read op with a plan (GetOp and counted searches write access counts)."""
    flt = MemoryFilter(memory_types=("fact",))
    return [
        tr.RecentOp(user, "s1", 3),
        tr.SummaryOp(user, "s1"),
        tr.GenerationOp(user),
        tr.UnindexedOp(user, 10),
        tr.SessionsOp(user),
        tr.TranscriptOp(user, limit=10),
        WorkStatsOp(user),
        ListOp(user, flt, 10, 1),
        CountOp(user, flt),
        SearchOp(user, "vector", _vector(9), None, 3, count_access=False),
        SearchOp(user, "keyword", None, "cats sofa", 3, count_access=False),
        SearchOp(user, "hybrid", _vector(9), "cats", 3, count_access=False),
        GetOp(user, tuple(ids[:2])),
    ]


def _shape(result: Any) -> Any:
    """A result without what a read changes (access counts and times) or cannot compare
    (vectors: equal arrays)."""
    if isinstance(result, list):
        return [_shape(r) for r in result]
    record = getattr(result, "record", None)
    if record is not None:
        return (_shape(record), round(float(result.score), 5))
    if hasattr(result, "access_count") and hasattr(result, "embedding"):
        return (result.id, result.content, result.metadata, result.created_at, result.importance)
    return result


def test_every_context_read_has_a_plan() -> None:
    for op in _reads("u", [uuid.uuid4()]):
        assert handler(op).plan, type(op).__name__


async def test_abatch_answers_as_batch(store: MemoryStore, new_user: Callable[[], str]) -> None:
    user = new_user()
    ids = _seeded(store, user)
    ops = _reads(user, ids)
    sync = store.batch(ops)
    native = await store.abatch(ops)
    assert _shape(native) == _shape(sync)
    assert [type(r) for r in native] == [type(r) for r in sync]


def _vectors(results: list[Any]) -> list[Any]:
    """The vectors of every record in ``results`` (search hits and records)."""
    found = []
    for result in results:
        for item in result if isinstance(result, list) else []:
            record = getattr(item, "record", item)
            if hasattr(record, "embedding"):
                found.append(record.embedding)
    return found


async def test_abatch_then_answers_as_batch(
    store: MemoryStore, new_user: Callable[[], str]
) -> None:
    """``then`` gets what ``batch`` returns (vectors equal, float32), in a thread."""
    user = new_user()
    ops = _reads(user, _seeded(store, user))
    loop_thread = threading.get_ident()
    threads = []

    def then(results: list[Any]) -> list[Any]:
        threads.append(threading.get_ident())
        return results

    native = await store.abatch_then(ops, then)
    sync = store.batch(ops)
    assert _shape(native) == _shape(sync)
    assert [type(r) for r in native] == [type(r) for r in sync]
    mine, theirs = _vectors(native), _vectors(sync)
    assert len(mine) == len(theirs) > 0
    for a, b in zip(mine, theirs, strict=True):
        assert a.dtype == np.float32 and np.array_equal(a, b)
    assert threads and threads[0] != loop_thread
    assert await store.abatch_then([], lambda results: results) == []


async def test_abatch_then_searches_a_big_user_as_batch(pg_store: PostgresStore) -> None:
    """A user over ``exact_max_rows``: the count, then HNSW's settings and its search
    (rounds that keep one transaction), as ``batch``; and the same once the count is
    cached."""
    user = f"u-{uuid.uuid4()}"
    rows = pg_store._postgres.exact_max_rows + 10
    texts = [f"note {i} about cats" if i % 3 else f"note {i} about tea" for i in range(rows)]
    pg_store.index.add_many(
        user, texts, embeddings=np.stack([_vector(100 + i) for i in range(rows)])
    )
    ops: list[Op] = [
        tr.GenerationOp(user),
        SearchOp(user, "vector", _vector(7), None, 5, count_access=False),
        SearchOp(user, "keyword", None, "cats", 5, count_access=False),
    ]
    for _ in range(2):
        pg_store._postgres._counts.forget(user)
        native = await pg_store.abatch_then(ops, lambda results: results)
        assert _shape(native) == _shape(pg_store.batch(ops))
        assert len(native[1]) == 5
    native = await pg_store.abatch_then(ops, lambda results: results)  # count cached
    assert _shape(native) == _shape(pg_store.batch(ops))
    pg_store.index.delete_user(user)


async def test_abatch_then_raises_what_then_raises(pg_store: PostgresStore) -> None:
    """A failing ``then`` fails the call; the connections stay usable."""
    user = f"u-{uuid.uuid4()}"
    ops = [tr.RecentOp(user, None, 3), SearchOp(user, "keyword", None, "x", 3)]

    def then(results: list[Any]) -> None:
        raise ValueError("planning failed")

    for _ in range(pg_store._apools._args[1] + 1):  # more than the pool holds
        with pytest.raises(ValueError, match="planning failed"):
            await pg_store.abatch_then(ops, then)
    assert await pg_store.abatch_then(ops, lambda results: results) == [[], []]


def test_rounds_give_their_connections_back_as_lent(pg_store: PostgresStore) -> None:
    """The rounds run in autocommit on the sync pool's connections; a failed statement,
    in an implicit or an explicit transaction (``relaxed``), rolls back and the pool gets
    each connection back idle and not in autocommit."""
    import psycopg
    from psycopg.pq import TransactionStatus

    from tiermem.stores.plans import Lockstep
    from tiermem.stores.postgres_rounds import run_then

    def failing() -> Any:
        yield ("SELECT 1", ())
        yield ("SELECT 1 / 0", ())

    size = pg_store._apools._args[1]
    for relaxed in (False, True):
        for _ in range(size + 1):  # more than the pool holds
            with pytest.raises(psycopg.errors.DivisionByZero):
                run_then(pg_store._pool.connection, Lockstep([failing()]), relaxed, list)
    held = [pg_store._pool.getconn() for _ in range(size)]
    try:
        for conn in held:
            assert not conn.autocommit
            assert conn.info.transaction_status == TransactionStatus.IDLE
    finally:
        for conn in held:
            pg_store._pool.putconn(conn)
    user = f"u-{uuid.uuid4()}"
    assert pg_store.batch([tr.RecentOp(user, None, 3)]) == [[]]


async def test_abatch_refuses_as_batch(store: MemoryStore) -> None:
    for bad in ([("not", "an", "op")], [tr.RecentOp("u", None, 1), 42]):
        with pytest.raises(InputError) as sync:
            store.batch(bad)  # type: ignore[list-item]
        with pytest.raises(InputError) as native:
            await store.abatch(bad)  # type: ignore[list-item]
        assert str(native.value) == str(sync.value)


async def test_derived_async_twins_match(store: MemoryStore, new_user: Callable[[], str]) -> None:
    user = new_user()
    _seeded(store, user)
    assert await store.transcript.arecent(user, "s1", 2) == store.transcript.recent(user, "s1", 2)
    assert await store.transcript.arows(user, limit=3) == store.transcript.rows(user, limit=3)
    assert await store.transcript.aunindexed(user) == store.transcript.unindexed(user)
    assert await store.transcript.asummary(user, "s1") == store.transcript.summary(user, "s1")
    assert await store.transcript.afailed(user) == store.transcript.failed(user) == []
    assert await store.queue.awork_stats(user) == store.queue.work_stats(user)
    assert user in await store.transcript.ausers(limit=10_000) and user in store.transcript.users(
        limit=10_000
    )
    with pytest.raises(InputError):
        await store.transcript.arows(user, state="lost")
    assert await store.transcript.aforget_messages(user, []) == 0


async def test_native_reads_use_the_loops_pool(pg_store: PostgresStore) -> None:
    """A read batch runs on this loop's async pool; a write goes to the sync pool."""
    user = f"u-{uuid.uuid4()}"
    await pg_store.abatch([tr.GenerationOp(user)])
    assert asyncio.get_running_loop() in pg_store._apools._pools
    await pg_store.transcript.aappend(
        user, None, [Message("user", "written through the sync pool")]
    )
    assert [m.content for m in await pg_store.transcript.arecent(user, None, 5)] == [
        "written through the sync pool"
    ]
    await pg_store._apools.aclose()
    assert asyncio.get_running_loop() not in pg_store._apools._pools


# -- an outage ---------------------------------------------------------------------------


class _Proxy:
    """A TCP port forwarding to PostgreSQL's Unix socket; :meth:`stop` is the outage (every
    connection cut, new ones refused), :meth:`start` the database back on the same port."""

    def __init__(self, socket_path: str) -> None:
        self.target = socket_path
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._open: list[socket.socket] = []
        self._server: socket.socket | None = None

    def start(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen()
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            _shut(s)

    def stop(self) -> None:
        if self._server is not None:
            _shut(self._server)  # wakes the thread blocked in accept(): a close would not
            self._server.close()
        for s in self._open:
            _shut(s)
            s.close()
        self._open.clear()


def _shut(s: socket.socket) -> None:
    with suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxied(pg_url: str) -> Iterator[tuple[_Proxy, str]]:
    parsed = urlparse(pg_url)
    folder = parse_qs(parsed.query).get("host", [""])[0]
    if not folder.startswith("/"):
        pytest.skip("the test PostgreSQL is not on a Unix socket")
    port = parsed.port or 5432
    proxy = _Proxy(str(Path(folder) / f".s.PGSQL.{port}"))
    proxy.start()
    user = parsed.username or "postgres"
    yield proxy, f"postgresql://{user}@127.0.0.1:{proxy.port}{parsed.path or '/postgres'}"
    proxy.stop()


async def test_outage_is_unavailable_then_recovers(proxied: tuple[_Proxy, str]) -> None:
    proxy, url = proxied
    user = f"u-{uuid.uuid4()}"
    with closing(PostgresStore(url, dimension=DIM, timeout=1)) as store:
        await store.transcript.aappend(user, "s", [Message("user", "before the outage")])
        ops = [tr.RecentOp(user, "s", 5), tr.GenerationOp(user)]
        assert store.batch(ops) == await store.abatch(ops)
        proxy.stop()
        with pytest.raises(StoreUnavailableError):
            store.batch(ops)
        with pytest.raises(StoreUnavailableError):
            await store.abatch(ops)
        with pytest.raises(StoreUnavailableError):
            await store.abatch_then(ops, lambda results: results)
        proxy.start()
        recent, _ = await store.abatch(ops)  # the first call after it succeeds
        assert [m.content for m in recent] == ["before the outage"]
        assert store.batch(ops)[0] == recent
        proxy.stop()
        proxy.start()  # every idle connection broken: the call tests them and reads again
        assert await store.abatch_then(ops, lambda results: results) == store.batch(ops)
        await store.aclose()


def test_a_loop_ends_while_its_pool_is_new_or_growing(pg_url: str, tmp_path: Path) -> None:
    """A script that awaits reads under ``asyncio.run`` ends, round after round, one read
    or several at once (the pool grows): a cancellation that lands while psycopg's pool
    worker makes a connection is taken for a failed connection, and the worker would
    wait on, holding the loop's end; the store closes the loop's pool as its tasks are
    cancelled."""
    script = tmp_path / "rounds.py"
    script.write_text(
        "import asyncio, sys\n"
        "from tiermem.stores.ops import CountOp\n"
        "from tiermem.stores.postgres import PostgresStore\n"
        "store = PostgresStore(sys.argv[1], dimension=8)\n"
        "async def reads(i, n):\n"
        "    await asyncio.gather(*(store.abatch([CountOp(f'r{i}-{j}')]) for j in range(n)))\n"
        "for i in range(20):\n"
        "    asyncio.run(reads(i, 1 + i % 4))\n"
        "print('ended')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script), pg_url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ended")
