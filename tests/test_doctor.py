"""``tiermem doctor`` against real parts: the packaged model, SQLite, PostgreSQL with and
without pgvector, Redis up and down, a broken configuration."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from conformance.test_synopsis_cache import redis_reachable
from tiermem.cli import main
from tiermem.cli.doctor import Check, _postgres, run_checks

SRC = str(Path(__file__).parents[1] / "src")


def statuses(checks: list[Check]) -> dict[str, str]:
    return {check.name: check.status for check in checks}


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tiermem.yaml"
    path.write_text(text)
    return path


def test_a_broken_configuration_fails_first_and_skips_the_rest(tmp_path: Path, capsys) -> None:
    path = write_config(tmp_path, "memory:\n  persistent:\n    provider: mongodb\n")
    checks = run_checks(path)
    assert statuses(checks) == {
        "configuration": "fail",
        "embedding model": "skip",
        "token encoding": "skip",
        "store": "skip",
        "synopsis cache": "skip",
    }
    assert "memory.persistent.provider" in checks[0].detail and checks[0].fix
    assert main(["doctor", "--config", str(path)]) == 1
    assert "memory.persistent.provider" in capsys.readouterr().out


@pytest.mark.slow
def test_the_embedded_default_is_healthy(tmp_path: Path, capsys) -> None:
    db = tmp_path / "new" / "memory.db"
    checks = run_checks(None, str(db))
    assert statuses(checks) == {
        "configuration": "ok",
        "embedding model": "ok",
        "token encoding": "ok",
        "store": "ok",
        "synopsis cache": "skip",
    }
    assert "384 dimensions" in checks[1].detail and "o200k_base" in checks[2].detail
    assert "created on first use" in checks[3].detail and not db.exists()  # nothing written
    assert main(["doctor", "--db", str(db)]) == 0
    assert "local/all-MiniLM-L6-v2" in capsys.readouterr().out


@pytest.mark.slow
def test_postgres_with_pgvector_and_redis_up(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    if not redis_reachable():
        pytest.skip("Redis is not reachable on 127.0.0.1:6379 (CI starts it)")
    path = write_config(
        tmp_path,
        "memory:\n  persistent:\n    provider: postgresql\n"
        f"    connection_string: '{pg_url}'\n"
        "  synopsis:\n    backend: redis\n    redis_url: redis://127.0.0.1:6379/0\n",
    )
    checks = run_checks(path)
    assert set(statuses(checks).values()) == {"ok"}, checks
    named = {check.name: check for check in checks}
    assert named["pgvector"].detail.startswith("vector ") and "partitions" in named


def test_the_postgres_layout_is_shown_and_a_mismatch_fails(pg_url: str) -> None:  # noqa: F811
    from conformance.conftest import fresh_database
    from tiermem.stores.postgres import PostgresStore

    def layout(url: str, partitions: int | None = None) -> Check:
        return {c.name: c for c in _postgres(url, None, partitions)}["partitions"]

    new = fresh_database("doctor")
    made = "new store: tables will be created"
    assert layout(new).detail == f"{made} hash-partitioned by user_id into 16"
    assert layout(new, 0).detail == f"{made} unpartitioned"
    PostgresStore(new, dimension=8, partitions=0).close()  # as stores before the default
    plain = layout(new)
    assert plain.status == "ok" and "unpartitioned" in plain.detail
    assert "tiermem copy" in plain.detail
    assert layout(new, 0).detail == "tables unpartitioned"  # chosen: no advice
    wrong = layout(new, 16)
    assert wrong.status == "fail" and "is 16, but table" in wrong.detail
    assert "partitions: 0" in wrong.fix


@pytest.mark.slow
def test_postgres_without_pgvector_and_redis_down(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    suffix = uuid.uuid4().hex[:10]
    role, database = f"doctor_user_{suffix}", f"doctor_db_{suffix}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'secret'")
        admin.execute(f"CREATE DATABASE {database} OWNER {role}")
    try:
        url = make_conninfo(pg_url, user=role, password="secret", dbname=database)
        path = write_config(
            tmp_path,
            "memory:\n  persistent:\n    provider: postgresql\n"
            f'    connection_string: "{url}"\n'
            "  synopsis:\n    backend: redis\n    redis_url: redis://127.0.0.1:1/0\n",
        )
        checks = {check.name: check for check in run_checks(path)}
        assert checks["store"].status == "ok"
        assert checks["pgvector"].status == "fail"
        assert "CREATE EXTENSION vector" in checks["pgvector"].detail
        assert checks["synopsis cache"].status == "fail" and "redis" in checks["synopsis cache"].fix
        assert main(["doctor", "--config", str(path)]) == 1
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")
            admin.execute(f"DROP ROLE {role}")


@pytest.mark.slow
def test_postgres_without_the_driver_says_which_extra(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        "memory:\n  persistent:\n    provider: postgresql\n"
        "    connection_string: postgresql://nobody@127.0.0.1:1/x\n",
    )
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"
        "from tiermem.cli.doctor import run_checks\n"
        f"for c in run_checks({str(path)!r}):\n"
        "    print(c.name, c.status, c.fix, sep='|')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split("|") for line in out.stdout.splitlines()]
    store = next(row for row in rows if row[0] == "store")
    assert store[1] == "fail" and store[2] == "pip install 'tiermem[postgres]'"
    assert next(row for row in rows if row[0] == "pgvector")[:2] == ["pgvector", "skip"]
