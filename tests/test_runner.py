"""The one background runner: wake, gather, idle, backoff, flush and close, on a clock
the test moves; and a dead worker's lease expiring when the store's clock moves."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conformance.conftest import _server_url
from embedders import HashEmbedder, SlowEmbedder, wait_until
from tiermem.clock import SYSTEM_CLOCK, ManualClock
from tiermem.errors import InvalidSizeError
from tiermem.messages import Message
from tiermem.runner import Backoff, Runner, backoff_delay
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.sqlite import SQLiteStore
from tiermem.work.worker import StoreWorker

DIM = 16


class Counter:
    """A round that counts its calls; raises while ``failing`` and reports ``more``."""

    def __init__(self, failing: int = 0, more: int = 0) -> None:
        self.calls = 0
        self.failing = failing
        self.more = more
        self.threads: set[str] = set()

    def __call__(self) -> bool:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.failing:
            self.failing -= 1
            raise OSError("down")
        if self.more:
            self.more -= 1
            return True
        return False


def test_the_first_wake_starts_the_thread_and_a_burst_gathers() -> None:
    clock, count = ManualClock(), Counter()
    runner = Runner(count, name="t-gather", clock=clock, gather=0.5)
    assert not runner.running and count.calls == 0  # nothing until it is needed
    runner.wake()
    runner.wake()
    assert clock.settle()  # gathering the burst
    clock.advance(0.4)
    assert clock.settle() and count.calls == 0
    clock.advance(0.1)
    assert wait_until(lambda: count.calls == 1)  # one round for the whole burst
    assert count.threads == {"t-gather"}
    runner.wake(now=True)  # no gathering
    assert wait_until(lambda: count.calls == 2)
    assert runner.close(5) and not runner.running


def test_rounds_repeat_while_more_work_waits_and_idle_rounds_come_on_the_clock() -> None:
    clock, count = ManualClock(), Counter(more=3)
    runner = Runner(count, name="t-idle", clock=clock, idle=10.0)
    runner.start()  # a timer: the first round comes after the idle interval
    assert clock.settle() and count.calls == 0
    clock.advance(10)
    assert wait_until(lambda: count.calls == 4)  # three more at once, then idle
    assert clock.settle() and count.calls == 4
    clock.advance(10)
    assert wait_until(lambda: count.calls == 5)
    runner.close()


def test_backoff_doubles_up_to_its_cap_and_starts_over_after_a_success() -> None:
    clock, count = ManualClock(), Counter(failing=5)
    waits: list[float] = []
    runner = Runner(
        count,
        name="t-backoff",
        clock=clock,
        backoff=Backoff(1.0, 4.0),
        on_error=lambda exc, wait: waits.append(wait),
    )
    runner.wake()
    for expected in (1.0, 2.0, 4.0, 4.0, 4.0):
        assert clock.settle() and waits[-1] == expected  # waiting out its backoff
        calls = count.calls
        clock.advance(expected - 0.01)
        assert clock.settle() and count.calls == calls  # not yet
        clock.advance(0.01)
        assert wait_until(lambda c=calls: count.calls == c + 1)  # type: ignore[misc]
    assert runner.flush(5) and runner.errors == 5 and runner.backoff.streak == 0  # reset
    count.failing = 1
    runner.wake()
    assert wait_until(lambda: len(waits) == 6) and waits[-1] == 1.0  # the first wait again
    runner.close()


def test_flush_waits_for_a_round_begun_after_it_and_times_out_while_rounds_fail() -> None:
    count = Counter()
    runner = Runner(count, name="t-flush", gather=600.0)  # a flush never waits out the gather
    assert runner.flush(5) and count.calls == 1
    count.failing = 10**6
    assert runner.flush(0.2) is False  # every round fails: not flushed, and it returned
    runner.close(5)
    assert runner.flush(1) is False  # closed: nothing runs any more


def test_close_ends_the_waits_and_lets_the_round_in_hand_finish() -> None:
    entered, release = threading.Event(), threading.Event()
    finished: list[bool] = []

    def slow() -> bool:
        entered.set()
        release.wait(10)
        finished.append(True)
        return False

    runner = Runner(slow, name="t-close", idle=3600.0)
    runner.wake()
    assert entered.wait(5)
    assert runner.close(timeout=0.05) is False  # the round is still in hand
    release.set()
    assert wait_until(lambda: not runner.running) and finished == [True]
    runner.wake()  # closed: never starts again
    assert not runner.running

    idle = Runner(Counter(), name="t-close-idle", clock=ManualClock(), idle=3600.0)
    idle.start()
    assert idle.close(timeout=5)  # an idle wait ends at once, on any clock


def test_a_runner_renews_its_leases_on_the_clock_until_it_closes() -> None:
    clock, renewals = ManualClock(), []
    runner = Runner(Counter(), name="t-renew", clock=clock, renew=lambda: renewals.append(1))
    runner.wake()
    assert clock.settle(waits=2) and renewals == []  # the loop idles, the renewer waits
    clock.advance(10)  # renew_every: 10 s by default
    assert wait_until(lambda: len(renewals) == 1)
    assert runner.close(5)
    assert wait_until(lambda: not any(t.name == "t-renew-lease" for t in threading.enumerate()))


def test_backoff_delay_and_the_manual_clock() -> None:
    assert [backoff_delay(0.5, n, 3.0) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff_delay(1.0, 10_000) == float("inf") or backoff_delay(1.0, 10_000) > 1e18
    clock = ManualClock(start=1000.0)
    assert clock.time() == 1000.0 and clock.monotonic() == 0.0
    clock.advance(2.5)
    assert clock.time() == 1002.5 and clock.monotonic() == 2.5
    with pytest.raises(InvalidSizeError):
        clock.advance(-1)
    assert not clock.settle(timeout=0.01)  # nobody waits on it
    assert abs(SYSTEM_CLOCK.time() - ManualClock().time()) < 60


# -- leases on the store's clock -------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    """A store of its own (PostgreSQL: a database of its own, so no other test's rows)."""
    if request.param == "sqlite":
        s: MemoryStore = SQLiteStore(tmp_path / "m.db", dimension=DIM)
        s.clock = ManualClock()
        yield s
        s.close()
        return
    url = os.environ.get("TIERMEM_TEST_PG_URL") or _server_url()
    name = f"runner_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    s = PostgresStore(make_conninfo(url, dbname=name), dimension=DIM)
    s.clock = ManualClock()
    yield s
    s.close()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name}")


def test_a_dead_workers_lease_expires_when_the_stores_clock_moves(store: MemoryStore) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    store.transcript.append("ana", "s", [Message("user", f"row {i}") for i in range(3)])
    dead = StoreWorker(store, HashEmbedder(DIM), background=False, lease=60)
    assert len(store.queue.claim(dead.owner, 10, dead.lease)) == 3  # claimed, then it died
    alive = StoreWorker(store, HashEmbedder(DIM), background=False, lease=60)
    assert alive.clock is clock  # a worker takes its store's clock
    assert alive.drain(5) and store.queue.work_stats("ana").pending == 3  # the dead one holds them
    clock.advance(59.9)
    assert alive.flush(timeout=0.1) is False  # still leased (a caller's timeout is real time)
    clock.advance(0.2)
    assert alive.flush(timeout=30) and store.queue.work_stats("ana").done == 3
    assert len(store.index.list("ana")) == 3


def test_a_round_slower_than_its_lease_keeps_its_rows(store: MemoryStore) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    slow = SlowEmbedder(delay=60, dimension=DIM)  # answers when released
    worker = StoreWorker(store, slow, lease=30, delay=0)
    store.transcript.append("ana", "s", [Message("user", f"row {i}") for i in range(3)])
    worker.wake()
    assert wait_until(lambda: len(worker._held_rows) == 3)  # claimed, embedding
    renewer = worker._runner._renewer
    assert renewer is not None and clock.settle()
    for n in range(1, 5):  # 40 s of the clock: past the 30 s lease, renewed every 10 s
        clock.advance(10)
        assert wait_until(lambda n=n: renewer.rounds == n)  # type: ignore[misc]
    assert store.queue.claim("another", 10, 30) == []  # still the slow worker's
    slow.release.set()
    assert wait_until(lambda: store.queue.work_stats("ana").done == 3)
    assert store.queue.work_stats("ana").pending == 0 and len(store.index.list("ana")) == 3
    worker.close()


def test_the_workers_gathering_and_idle_looks_are_on_the_stores_clock(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db", dimension=DIM) as store:
        clock = ManualClock()
        store.clock = clock
        worker = StoreWorker(store, HashEmbedder(DIM), delay=0.5, idle_interval=30.0)
        store.transcript.append("ana", "s", [Message("user", "the tide was low")])
        worker.wake()
        assert clock.settle(waits=2)  # the loop gathers, its lease renewer waits
        assert store.queue.work_stats("ana").pending == 1
        clock.advance(0.5)
        assert wait_until(lambda: store.queue.work_stats("ana").done == 1)
        store.transcript.append("ana", "s", [Message("user", "nobody woke the worker")])
        assert clock.settle(waits=2) and store.queue.work_stats("ana").pending == 1
        clock.advance(30)  # its idle look finds it
        assert wait_until(lambda: store.queue.work_stats("ana").done == 2)
        worker.close()
