"""``tiermem copy`` (src/tiermem/cli/copying.py) on real SQLite and PostgreSQL: every kind of
data, verified; killed with SIGKILL and run again; a destination that goes away; the
refusals (another dimension, a store of other data)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from embedders import HashEmbedder
from test_export import CONFIG, fill
from tiermem.cli import main
from tiermem.cli.copying import CopyReport, copy_store
from tiermem.errors import DimensionMismatchError, InputError, StoreUnavailableError
from tiermem.memory import Memory
from tiermem.messages import Message
from tiermem.server.keys import KeyStore
from tiermem.stores.migrate import open_store
from tiermem.stores.postgres import PostgresStore

DIM = 32
SRC = Path(__file__).parents[1] / "src"
TENANT_USER = "acme\x1fana"


def fresh_database(url: str) -> str:
    """A new, empty database on the test PostgreSQL, as a URL."""
    import psycopg

    name = f"copy_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path=f"/{name}"))


def populate(location: str, extra_messages: int = 0) -> str:
    """Every kind of data: two users (sessions, tool calls, summaries, facts with their
    history, remembered memories), a tenant's user, a plain user with ``extra_messages``
    pending messages, and API keys; returns a key's token."""
    embedder = HashEmbedder(DIM)
    if location.startswith("postgresql://"):
        store = PostgresStore(location, dimension=DIM, embedder=embedder)
        memory = Memory(config=CONFIG, store=store, embedder=embedder)
    else:
        store = None
        memory = Memory(location, config=CONFIG, embedder=embedder)
    try:
        for user in ("ana", "bob", TENANT_USER):
            fill(memory, user)
            memory.add("user", "My favourite tea is matcha.", user, "s3")  # supersedes
            memory.add("assistant", "Noted.", user, "s3")
            assert memory.flush(30)
            memory.extract_facts(user, "s3")
        assert memory.flush(30)
    finally:
        memory.close()
        if store is not None:
            store.close()
    with open_store(location, DIM) as raw:
        for n in range(extra_messages):
            session = f"s{n % 3}"
            raw.transcript.append("carol", session, [Message("user", f"note {n} about the garden")])
        raw.index.add("carol", "Carol grows tomatoes", embedding=np.ones(DIM))
    keys = KeyStore(location)
    try:
        _, token = keys.create("acme", "ci")
        keys.create("beta")
        keys.note_user("acme", TENANT_USER)
        return token
    finally:
        keys.close()


def assert_complete(report: CopyReport, users: int = 4) -> None:
    assert report.ok, report
    assert len(report.users) == users
    assert all(u.same and u.source == u.destination for u in report.users)
    ana = next(u for u in report.users if u.user_id == "ana").source
    assert ana["message"] == 11 and ana["summary"] >= 1 and ana["fact_mark"] >= 1
    assert ana["memory"] > 9
    assert report.keys == (3, 3)


def check_destination(location: str, token: str) -> None:
    """The copy works as a store: keys verify, facts keep their history, search finds."""
    keys = KeyStore(location)
    try:
        key = keys.verify(token)
        assert key is not None and key.tenant == "acme"
        assert keys.users("acme") == [TENANT_USER]
    finally:
        keys.close()
    with open_store(location, DIM) as store:
        facts = [r for r in store.index.list("ana", limit=100) if r.memory_type == "fact"]
        assert any(r.metadata.get("valid_until") for r in facts)  # a closed version
        assert any(r.metadata.get("replaces") for r in facts)
        assert store.index.search("ana", "tea", mode="keyword")
        before = len(store.transcript.rows("ana", limit=100))
        store.transcript.append("ana", "s9", [Message("user", "written after the move")])
        assert len(store.transcript.rows("ana", limit=100)) == before + 1


@pytest.mark.parametrize("engines", ["sqlite->sqlite", "sqlite->postgres", "postgres->sqlite"])
def test_copy_moves_every_kind_of_data_verified(
    engines: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    def place(engine: str, name: str) -> str:
        if engine == "postgres":
            return fresh_database(request.getfixturevalue("pg_url"))
        return str(tmp_path / name)

    source, destination = (
        place(e, n) for e, n in zip(engines.split("->"), ("a.db", "b.db"), strict=True)
    )
    token = populate(source, extra_messages=5)
    seen: list[int] = []
    report = copy_store(source, destination, batch_size=4, progress=lambda d, t, u: seen.append(d))
    assert_complete(report)
    assert not report.resumed and seen == sorted(seen) and seen[-1] > 40
    assert report.added["message"] == report.sent["message"] == 11 * 3 + 5
    # run again: nothing doubled, the same verified result
    again = copy_store(source, destination, batch_size=4)
    assert again.ok and again.added == {"message": 0, "memory": 0}
    assert [u.source_hash for u in again.users] == [u.source_hash for u in report.users]
    check_destination(destination, token)


def test_a_plain_postgresql_store_moves_to_a_partitioned_one(
    pg_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The way from a store made before partitions were the default: copy it into a new
    database, which is made with the default layout (docs/scaling.md)."""
    from tiermem.stores.partitions import DEFAULT_PARTITIONS, layout
    from tiermem.stores.transcript import TRANSCRIPT

    source, destination = fresh_database(pg_url), fresh_database(pg_url)
    PostgresStore(source, dimension=DIM, partitions=0).close()  # as an older tiermem made it
    token = populate(source)
    assert_complete(copy_store(source, destination))
    check_destination(destination, token)
    chosen = fresh_database(pg_url)  # the command, with a count of one's own
    assert main(["copy", "--from", source, "--to", chosen, "--partitions", "4"]) == 0
    assert main(["copy", "--from", source, "--to", chosen, "--partitions", "2"]) == 1
    assert "is 2, but table" in " ".join(capsys.readouterr().err.split())
    for url, count in ((source, 0), (destination, DEFAULT_PARTITIONS), (chosen, 4)):
        with PostgresStore(url, dimension=DIM) as store, store._transaction() as conn:
            assert store.partitions == count
            assert set(layout(conn, [f"memories_{DIM}", TRANSCRIPT]).values()) == {count}


def test_the_command_prints_counts_and_hashes_and_refuses_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, destination = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    populate(source)
    assert main(["copy", "--from", source, "--to", destination, "--batch-size", "3"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "'ana'" in out and "ok" in out and "4 users verified, 0 mismatched" in out
    assert main(["copy", "--from", source, "--to", destination, "--batch-size", "0"]) == 1
    assert capsys.readouterr().err.startswith("error: --batch-size: must be >= 1")
    missing = str(tmp_path / "nothing.db")
    assert main(["copy", "--from", missing, "--to", destination]) == 1
    assert "does not exist" in " ".join(capsys.readouterr().err.split())
    assert not Path(missing).exists()


def test_another_dimension_is_refused_with_the_command_that_re_embeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, destination = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    populate(source)
    open_store(destination, 16).close()  # a store made with a 16-dimension model
    with pytest.raises(DimensionMismatchError) as caught:
        copy_store(source, destination)
    assert "tiermem migrate-embeddings --from-dim 32 --to-dim 16" in str(caught.value)
    assert main(["copy", "--from", source, "--to", destination]) == 1
    assert "migrate-embeddings" in capsys.readouterr().err
    with open_store(destination, 16) as store:
        assert store.transcript.users() == []


def test_a_store_of_other_data_is_refused_unless_merge(tmp_path: Path) -> None:
    source, destination = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    populate(source)
    with open_store(destination, DIM) as other:
        other.index.add("zoe", "Zoe keeps bees", embedding=np.ones(DIM))
        other.index.add("ana", "Ana already had this", embedding=np.ones(DIM))
    with pytest.raises(InputError, match=r"not empty .*--merge"):
        copy_store(source, destination)
    with open_store(destination, DIM) as store:
        assert store.transcript.users() == ["ana", "zoe"]  # nothing written
    report = copy_store(source, destination, merge=True)
    assert report.ok and not report.mismatches
    ana = next(u for u in report.users if u.user_id == "ana")
    assert not ana.same and ana.contained  # the union: what was there stays
    with open_store(destination, DIM) as store:
        assert {"ana", "zoe", "carol"} <= set(store.transcript.users())


def state_rows(path: Path) -> int:
    """Rows the copy state in a SQLite destination says are copied (0: none yet)."""
    import json

    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=0.1) as conn:
            row = conn.execute("SELECT state FROM tiermem_copies").fetchone()
    except sqlite3.Error:
        return 0
    return 0 if row is None else int(json.loads(row[0])["rows"])


def test_sigkill_in_the_middle_then_run_again_gives_the_same_verified_copy(
    tmp_path: Path,
) -> None:
    source, destination = tmp_path / "a.db", tmp_path / "b.db"
    populate(str(source), extra_messages=200)
    command = [sys.executable, "-m", "tiermem.cli", "copy", "--from", str(source)]
    command += ["--to", str(destination), "--batch-size", "1"]
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while state_rows(destination) < 30 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    reached = state_rows(destination)
    assert 30 <= reached < 280  # stopped in the middle
    report = copy_store(str(source), str(destination), batch_size=7)
    assert report.resumed and report.ok
    assert report.sent["message"] + report.sent["memory"] <= 300 - reached + 7
    assert_complete(report)
    whole = copy_store(str(source), str(tmp_path / "c.db"))
    assert [u.destination_hash for u in whole.users] == [u.destination_hash for u in report.users]


@pytest.fixture
def closable(pg_url: str) -> Iterator[tuple[str, str]]:  # noqa: F811
    """A fresh database and its name; connections to it are allowed again afterwards."""
    url = fresh_database(pg_url)
    name = urllib.parse.urlsplit(url).path.strip("/")
    yield url, name
    allow(pg_url, name, True)


def allow(admin_url: str, name: str, allowed: bool) -> None:
    """Let clients connect to database ``name`` or not (and cut those connected)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS {str(allowed).lower()}")
        if not allowed:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )


def test_a_destination_that_goes_away_fails_naming_the_row_and_a_rerun_completes(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
    closable: tuple[str, str],
) -> None:
    source = str(tmp_path / "a.db")
    populate(source, extra_messages=20)
    destination, name = closable
    pages: list[int] = []

    def cut(done: int, total: int, user: str) -> None:
        pages.append(done)
        if len(pages) == 6:
            allow(pg_url, name, False)  # the database goes away under the copy

    with pytest.raises(StoreUnavailableError) as caught:
        copy_store(source, destination, batch_size=5, progress=cut)
    message = str(caught.value)
    assert "copy stopped at user" in message and "run the same command again" in message
    assert f"({pages[-1]} of " in message  # the rows it reached
    allow(pg_url, name, True)
    report = copy_store(source, destination, batch_size=5)
    assert report.resumed
    assert_complete(report)
