"""Fixtures of the framework adapter tests: a real Memory on each store engine.

Every adapter test runs on a SQLite file and on PostgreSQL + pgvector (a fresh database
per test on the session's pgserver, or on ``TIERMEM_TEST_PG_URL``, holding an empty store
of the default layout). The hashing embedder
keeps them fast; they are about the adapters, not the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.conftest import fresh_store_database
from embedders import HashEmbedder
from tiermem.memory import Memory
from tiermem.stores.postgres import PostgresStore

DIM = 32


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A Memory on a fresh SQLite file or a fresh PostgreSQL database, closed after."""
    embedder = HashEmbedder(DIM)
    if request.param == "sqlite":
        m = Memory(str(tmp_path / "memory.db"), embedder=embedder)
        yield m
        m.close()
        return
    store = PostgresStore(fresh_store_database(DIM), dimension=DIM, embedder=embedder)
    m = Memory(store=store, embedder=embedder)
    yield m
    m.close()
    store.close()
