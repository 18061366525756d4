"""PostgresStore specifics: plan choice per user, a database down or lost mid-batch."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from tiermem.errors import StoreUnavailableError
from tiermem.stores.postgres import PostgresStore

DIM = 8


def vecs(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStore]:  # noqa: F811
    store = PostgresStore(pg_url, dimension=DIM)
    yield store
    store.close()


def test_both_plans_agree_with_exact(pg_url: str) -> None:  # noqa: F811
    user = f"u-{uuid.uuid4()}"
    m = vecs(300, 1)
    exact = PostgresStore(pg_url, dimension=DIM, exact_max_rows=10**9)
    hnsw = PostgresStore(pg_url, dimension=DIM, exact_max_rows=0, ef_search=200)
    ids = exact.index.add_many(user, [f"m{i}" for i in range(300)], embeddings=m)
    hnsw.index.add_many(
        f"other-{uuid.uuid4()}", [f"o{i}" for i in range(300)], embeddings=vecs(300, 2)
    )
    agree = 0
    for q in vecs(10, 3):
        truth = [ids[i] for i in np.argsort(-(m @ q))[:10]]
        assert [h.record.id for h in exact.index.search(user, vector=q, limit=10)] == truth
        got = hnsw.index.search(user, vector=q, limit=10)
        assert len(got) == 10 and all(h.record.user_id == user for h in got)
        agree += len({h.record.id for h in got} & set(truth))
    assert agree >= 95
    # a filter that leaves fewer rows than asked: HNSW comes back short, exact answers
    tools = hnsw.index.add_many(user, ["t1", "t2", "t3"], embeddings=vecs(3, 4), memory_type="tool")
    found = hnsw.index.search(user, vector=vecs(1, 5)[0], limit=10, memory_type="tool")
    assert sorted(h.record.id for h in found) == sorted(tools)
    exact.close()
    hnsw.close()


def test_database_down_raises_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    with pytest.raises(StoreUnavailableError):
        PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/postgres", dimension=DIM, timeout=2)


def test_connection_lost_mid_batch_rolls_back(pg: PostgresStore, pg_url: str) -> None:  # noqa: F811
    """The batch adds rows, then waits on a lock; its backend is killed: nothing is kept."""
    writer, victim = f"w-{uuid.uuid4()}", f"v-{uuid.uuid4()}"
    vid = pg.index.add(victim, "locked row", embedding=vecs(1)[0])
    holder = psycopg.connect(pg_url)
    holder.execute(f"SELECT 1 FROM {pg.table} WHERE id = %s FOR UPDATE", (vid,))
    from tiermem.stores.ops import AddOp, DeleteOp
    from tiermem.stores.records import NewMemory
    from tiermem.stores.validate import check_vector

    items = tuple(
        NewMemory(f"row {i}", embedding=check_vector(v, DIM)) for i, v in enumerate(vecs(50))
    )
    errors: list[BaseException] = []

    def run() -> None:
        try:
            pg.batch([AddOp(writer, items), DeleteOp(victim, (vid,))])
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for _ in range(100):
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE%%'"
            ).fetchall()
            if killed:
                break
            time.sleep(0.05)
    thread.join(10)
    holder.rollback()
    holder.close()
    assert killed and len(errors) == 1 and isinstance(errors[0], StoreUnavailableError)
    assert (
        pg.index.count(writer) == 0 and pg.index.count(victim) == 1
    )  # the pool recovered, nothing half-written
    pg.index.add(writer, "after the outage", embedding=vecs(1)[0])
    assert pg.index.count(writer) == 1


def test_server_settings_are_not_frozen_by_prepared_statements(pg: PostgresStore) -> None:
    """Many identical searches (psycopg would prepare them) keep honouring SET LOCAL."""
    user = f"u-{uuid.uuid4()}"
    pg._postgres.exact_max_rows = 0
    pg.index.add_many(user, [f"m{i}" for i in range(40)], embeddings=vecs(40, 5))
    for q in vecs(12, 6):
        assert len(pg.index.search(user, vector=q, limit=10)) == 10
    with pg._pool.connection() as conn:
        assert conn.prepare_threshold is None


@pytest.mark.parametrize(
    ("durability", "writes"), [("committed", "on"), ("synced", "on"), ("async_commit", "off")]
)
def test_only_async_commit_acknowledges_before_the_wal_flush(
    pg_url: str,  # noqa: F811
    durability: str,
    writes: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever the environment's default (libpq's PGOPTIONS here), a write waits for its
    WAL flush unless the store was opened with ``async_commit`` (tests/test_write_path.py
    crashes the server)."""
    monkeypatch.setenv("PGOPTIONS", "-c synchronous_commit=off")
    store = PostgresStore(pg_url, dimension=DIM, durability=durability)
    try:
        with store._transaction() as conn:
            row = conn.execute("SHOW synchronous_commit").fetchone()
            assert row is not None and row["synchronous_commit"] == writes
    finally:
        store.close()


def test_writers_of_one_user_never_deadlock(pg: PostgresStore) -> None:
    """Adds, updates and deletes of one user from many connections at once: each takes the
    user's writer lock before the generation row, so none waits on another in a cycle
    (before the fix, PostgreSQL killed some of them with 'deadlock detected')."""
    user = f"user-{uuid.uuid4()}"
    errors: list[Exception] = []

    def write(worker: int) -> None:
        try:
            for i in range(30):
                [memory_id] = pg.index.add_many(
                    user, [f"fact {worker} {i}"], embeddings=vecs(1, worker * 100 + i)
                )
                if i % 3 == 0:
                    pg.index.update(user, memory_id, importance=0.9)
                if i % 4 == 0:
                    pg.index.delete(user, memory_id)
        except Exception as exc:  # collected: the assertion names them
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
