"""Schema histories per table: a database made before the shared tables had their own
histories (when each ``memories_{dim}`` table's migrations created them) opens and works."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from tiermem.messages import Message
from tiermem.stores import schema
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.sqlite import SHARED, SQLiteStore

DIM = 8
OLD_INDEX_STEPS = ("003_transcript", "004_facts", "005_generations")
"""The steps of the index table that created the shared tables, in older versions."""


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def sqlite_engine(tmp_path: Path) -> tuple[Callable[[], MemoryStore], Callable[[str], object]]:
    path = tmp_path / "old.db"

    def run(sql: str) -> object:
        with sqlite3.connect(path, isolation_level=None) as raw:
            return raw.execute(sql).fetchall()

    return lambda: SQLiteStore(path, dimension=DIM), run


def postgres_engine(url: str) -> tuple[Callable[[], MemoryStore], Callable[[str], object]]:
    import psycopg

    name = f"old_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    own = psycopg.conninfo.make_conninfo(url, dbname=name)

    def run(sql: str) -> object:
        with psycopg.connect(own, autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else None

    return lambda: PostgresStore(own, dimension=DIM), run


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_database_whose_index_migrations_made_the_shared_tables_opens_and_works(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if engine == "sqlite":
        open_store, run = sqlite_engine(tmp_path)
    else:
        open_store, run = postgres_engine(request.getfixturevalue("pg_url"))
    with open_store() as store:
        kept = store.index.add("u", "the lighthouse keeper", embedding=unit(1))
        store.transcript.append("u", "s", [Message("user", "hello there")])
    # the bookkeeping as older versions left it: the shared tables' steps under the index
    run("DELETE FROM tiermem_migrations WHERE table_name LIKE 'tiermem_%'")
    for step in OLD_INDEX_STEPS:
        run(
            "INSERT INTO tiermem_migrations (table_name, name, applied_at) SELECT"
            f" 'memories_{DIM}', '{step}', 'then' WHERE NOT EXISTS (SELECT 1 FROM"
            f" tiermem_migrations WHERE table_name = 'memories_{DIM}' AND name = '{step}')"
        )
    with open_store() as store:  # each shared table's first step finds its table there
        assert store.index.get("u", kept) is not None
        assert [m.text for m in store.transcript.recent("u", "s", 10)] == ["hello there"]
        assert store.transcript.append("u", "s", [Message("assistant", "hi, Ana")]) == 1
        assert store.queue.work_stats("u").pending == 2
    applied = run("SELECT table_name, name FROM tiermem_migrations")
    assert isinstance(applied, list)
    assert {(t, n) for t, n in applied if t in SHARED} == {(t, "001_create") for t in SHARED}
    with open_store() as store:  # and once recorded, opening runs nothing
        assert store.index.count("u") == 1


def test_every_table_keeps_its_own_history(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db", dimension=DIM), SQLiteStore(tmp_path / "m.db", dimension=4):
        pass
    with sqlite3.connect(tmp_path / "m.db") as raw:
        tables = {t for (t,) in raw.execute("SELECT table_name FROM tiermem_migrations")}
    assert tables == {*SHARED, "memories_8", "memories_4"}
    with pytest.raises(ValueError, match="unique"):
        schema.pending(
            [schema.Migration("a", lambda t, d: []), schema.Migration("a", lambda t, d: [])], set()
        )
