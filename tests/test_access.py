"""AccessLog and Memory's access counting on a real SQLite file."""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from pathlib import Path

import pytest

from embedders import HashEmbedder, wait_until
from tiermem.clock import ManualClock
from tiermem.errors import InputError
from tiermem.memory import Memory
from tiermem.memory.access import AccessLog
from tiermem.stores.sqlite import SQLiteStore


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "m.db", embedder=HashEmbedder(16), timeout=0.2)
    yield s
    s.close()


def counts(store: SQLiteStore, user: str) -> dict[str, int]:
    return {r.content: r.access_count for r in store.index.list(user)}


def test_counts_are_written_in_the_background_and_by_flush(store: SQLiteStore) -> None:
    a, b = store.index.add_many("u1", ["alpha", "beta"])
    (c,) = store.index.add_many("u2", ["alpha"])
    clock = ManualClock()
    store.clock = clock
    log = AccessLog(store, interval=60)
    log.record("u1", [str(a), str(a), str(b)])
    log.record("u1", [str(a)])
    log.record("u2", [str(c)])
    assert clock.settle() and log.pending == 3  # an interval's accesses gather
    clock.advance(60)
    assert wait_until(lambda: counts(store, "u1") == {"alpha": 3, "beta": 1})
    assert counts(store, "u2") == {"alpha": 1}
    assert log.pending == 0
    log.record("u1", [str(b)])
    log.close()  # writes what waits
    assert counts(store, "u1") == {"alpha": 3, "beta": 2}
    log.record("u1", [str(b)])  # after close: ignored
    assert log.pending == 0


def test_one_wake_per_interval_and_a_new_one_after_each_write(store: SQLiteStore) -> None:
    """Only the first waiting access wakes the runner (a thread switch per prompt costs
    more than the count); accesses recorded after a write wake it again."""
    (a,) = store.index.add_many("u1", ["alpha"])
    clock = ManualClock()
    store.clock = clock
    log = AccessLog(store, interval=60)
    wakes = []
    wake = log._runner.wake
    log._runner.wake = lambda now=False: (wakes.append(now), wake(now))[1]  # type: ignore[method-assign]
    for _ in range(5):
        log.record("u1", [str(a)])
    assert clock.settle() and len(wakes) == 1 and log.pending == 1
    clock.advance(60)
    assert wait_until(lambda: counts(store, "u1") == {"alpha": 5}) and clock.settle()
    log.record("u1", [str(a)])
    assert len(wakes) == 2
    # the runner leaves its idle wait for the interval's: move the clock until it wrote
    assert wait_until(lambda: clock.advance(60) or counts(store, "u1") == {"alpha": 6})
    log.close()


def test_a_store_that_refuses_keeps_the_counts_for_later(
    tmp_path: Path, store: SQLiteStore
) -> None:
    (a,) = store.index.add_many("u1", ["alpha"])
    log = AccessLog(store, interval=3600)
    log.record("u1", [str(a)])
    blocker = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        assert log.flush() is False
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert log.failures == 1 and log.pending == 1
    log.record("u1", [str(a)])
    assert log.flush() is True
    assert counts(store, "u1") == {"alpha": 2}
    log.close()


def test_bad_ids_are_refused_whole(store: SQLiteStore) -> None:
    (a,) = store.index.add_many("u1", ["alpha"])
    log = AccessLog(store, interval=3600)
    with pytest.raises(InputError):
        log.record("u1", [str(a), "not-a-uuid"])
    assert log.pending == 0
    log.record("u1", [a])  # UUID objects are fine too
    assert log.flush() and counts(store, "u1") == {"alpha": 1}
    log.close()


def test_flush_waits_for_a_write_in_progress(tmp_path: Path, store: SQLiteStore) -> None:
    (a,) = store.index.add_many("u1", ["alpha"])
    slow = SQLiteStore(tmp_path / "m.db", dimension=16, timeout=5.0)
    log = AccessLog(slow, interval=3600)
    log.record("u1", [str(a)])
    blocker = sqlite3.connect(tmp_path / "m.db", isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN EXCLUSIVE")  # the first write waits for this lock
    writer = threading.Thread(target=log.flush)
    writer.start()
    threading.Event().wait(0.2)
    threading.Timer(0.3, lambda: (blocker.execute("ROLLBACK"), blocker.close())).start()
    assert log.flush() is True  # waited for the write in progress, not an empty queue
    assert counts(store, "u1") == {"alpha": 1}
    writer.join()
    log.close()
    slow.close()


def test_discard_user_and_the_pending_limit(
    store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    log = AccessLog(store, interval=3600, max_pending=3)
    log.record("gone", [str(uuid.uuid4())])
    log.record("kept", [str(uuid.uuid4())])
    log.discard_user("gone")
    assert log.pending == 1
    with caplog.at_level(logging.WARNING, logger="tiermem.memory.access"):
        log.record("kept", [str(uuid.uuid4()) for _ in range(4)])
    assert log.pending == 3 and "dropped 2 access counts" in caplog.text
    log.close()


def test_get_context_counts_only_the_memories_it_used(tmp_path: Path) -> None:
    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32))
    try:
        for i in range(30):
            memory.remember(f"the garden has plant number {i} growing tall", "u1", "fact", 0.5)
        memory.remember("nothing in common", "u1", "fact", 0.5)
        context = memory.get_context("garden plant growing", "u1", max_tokens=120)
        used = {i.memory_id for i in context.items if i.memory_id}
        assert 0 < len(used) < 30
        assert memory.flush()
        by_id = {r.id: r.access_count for r in memory.store.index.list("u1")}
        assert {k for k, v in by_id.items() if v} == used
        assert all(by_id[k] == 1 for k in used)
        memory.get_context("garden plant growing", "u1", max_tokens=120)
        memory.forget_user("u1")  # the waiting counts of an erased user go too
        assert memory.accesses.pending == 0
    finally:
        memory.close()
