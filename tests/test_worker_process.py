"""`tiermem worker`: real worker processes beside an add-only Memory, on SQLite and on
PostgreSQL. Two workers index every message exactly once; SIGTERM mid-round gives the
claimed rows back at once and exits 0; SIGKILL mid-round loses nothing (another worker
takes the rows once the lease expires). The command itself (the default model) is run
in `test_worker_command_starts_serves_and_stops`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from embedders import HashEmbedder
from liveserver import free_port
from tiermem.memory import Memory

ROOT = Path(__file__).parents[1]
WORKER = ROOT / "tests" / "procs" / "worker.py"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store of this test alone (workers claim every user's rows): a SQLite file, or a
    fresh database on the session's PostgreSQL."""
    if request.param == "sqlite":
        yield str(tmp_path / "memory.db")
        return
    import psycopg

    base: str = request.getfixturevalue("pg_url")
    name = f"workers_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(base)
    yield urlunsplit(parts._replace(path=f"/{name}"))


def front_end(url: str) -> Memory:
    """An add-only Memory: it commits messages and embeds nothing."""
    persistent: dict[str, Any] = (
        {"provider": "postgresql", "connection_string": url}
        if url.startswith("postgresql://")
        else {"path": url}
    )
    config = {"memory": {"persistent": persistent, "worker": {"background": False}}}
    return Memory(config=config, embedder=HashEmbedder(384))


def add_messages(memory: Memory, count: int) -> list[str]:
    users = [f"user-{n}" for n in range(5)]
    for i in range(count):
        memory.add("user", f"message {i} of the load, about topic {i % 11}", users[i % 5], "s")
    return users


def start_worker(url: str, *options: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), url, str(port), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.1)
    raise AssertionError("the worker did not come up")


def gauge(base: str, name: str) -> float:
    for line in httpx.get(f"{base}/metrics", timeout=5).text.splitlines():
        if line.startswith(f"tiermem_{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def wait_for(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def indexed_once(memory: Memory, users: list[str], count: int) -> None:
    """Every message done, one index row per message (each line is distinct)."""
    assert memory.work_stats().pending == 0 and memory.work_stats().failed == 0
    assert sum(memory.stats(u).count for u in users) == count


def stop(proc: subprocess.Popen[str], signum: int) -> tuple[int, str]:
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def test_two_workers_index_every_message_exactly_once(store_url: str) -> None:
    count = 300
    with front_end(store_url) as memory:
        workers = [start_worker(store_url) for _ in range(2)]
        try:
            users = add_messages(memory, count)
            assert wait_for(lambda: memory.work_stats().pending == 0, 60)
            indexed_once(memory, users, count)

            def handled() -> list[float]:
                return [gauge(base, "worker_indexed_rows") for _, base in workers]

            assert wait_for(lambda: sum(handled()) >= count, 10)  # its count follows the rows
            done = handled()
            assert sum(done) == count  # nothing indexed twice
            assert gauge(workers[0][1], "pending_work") == 0
            assert gauge(workers[0][1], "pending_lag_seconds") == 0
            health = httpx.get(f"{workers[1][1]}/health", timeout=5).json()
            assert health["status"] == "ok" and health["indexed"] == done[1]
        finally:
            for proc, _ in workers:
                code, out = stop(proc, signal.SIGTERM)
                assert code == 0, out


def test_sigterm_mid_round_gives_the_claimed_rows_back(store_url: str) -> None:
    """A worker stopped while it embeds (a slow model, no grace) gives its rows back at
    once: a second worker indexes them long before the 600 s lease would free them."""
    count = 40
    with front_end(store_url) as memory:
        users = add_messages(memory, count)
        slow, base = start_worker(store_url, "--delay", "30", "--lease", "600", "--grace", "0")
        assert wait_for(lambda: gauge(base, "claimed_work") > 0, 30)
        code, out = stop(slow, signal.SIGTERM)
        assert code == 0, out
        assert "16 claimed rows given back" in out
        fast, _ = start_worker(store_url, "--lease", "600")
        try:
            assert wait_for(lambda: memory.work_stats().pending == 0, 60)
            indexed_once(memory, users, count)
        finally:
            assert stop(fast, signal.SIGTERM)[0] == 0


def test_sigkill_mid_round_loses_nothing(store_url: str) -> None:
    """A worker killed while it holds rows: they wait for their (2 s) lease, then another
    worker indexes them, each once."""
    count = 40
    with front_end(store_url) as memory:
        users = add_messages(memory, count)
        doomed, base = start_worker(store_url, "--delay", "30", "--lease", "2")
        assert wait_for(lambda: gauge(base, "claimed_work") > 0, 30)
        doomed.kill()
        doomed.wait(10)
        killed_at = time.monotonic()
        survivor, base = start_worker(store_url, "--lease", "2")
        try:
            assert wait_for(lambda: memory.work_stats().pending == 0, 60)
            assert time.monotonic() - killed_at > 1.0  # the held rows waited for the lease
            indexed_once(memory, users, count)
            assert wait_for(lambda: gauge(base, "worker_indexed_rows") == count, 10)
        finally:
            assert stop(survivor, signal.SIGTERM)[0] == 0


def test_worker_command_checks_its_options_before_loading() -> None:
    from tiermem.cli import main

    assert main(["worker", "--port", "70000"]) == 1
    assert main(["worker", "--grace", "-1"]) == 1
    assert main(["worker", "--db", "/no/such/folder/memory.db"]) == 1


@pytest.mark.slow
def test_worker_command_starts_serves_and_stops(tmp_path: Path) -> None:
    """The real `tiermem worker` (the default model): it indexes what an add-only
    Memory adds, answers /health and /metrics, and exits 0 on SIGTERM."""
    db = tmp_path / "memory.db"
    config = tmp_path / "tiermem.yaml"
    config.write_text(f"memory:\n  persistent:\n    path: {db}\n")
    port = free_port()
    port_option = ("--port", str(port))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tiermem.cli", "worker", "--config", str(config), *port_option],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                return httpx.get(f"{base}/health", timeout=1).status_code == 200
            except httpx.TransportError:
                return proc.poll() is not None

        assert wait_for(up, 120) and proc.poll() is None
        with Memory(
            config={"memory": {"persistent": {"path": str(db)}, "worker": {"background": False}}}
        ) as memory:
            memory.add("user", "I moved to Lisbon last spring.", "ana", "s")
            assert wait_for(lambda: memory.work_stats("ana").pending == 0, 60)
            assert memory.search("Where does Ana live?", "ana", mode="vector")
        assert gauge(base, "pending_work") == 0
    finally:
        code, out = stop(proc, signal.SIGTERM)
    assert code == 0 and "stopped" in out, out
