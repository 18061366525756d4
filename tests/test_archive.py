"""Archiver: batches, flush, retry after failure (nothing dropped), discard_user, close."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedders import FailingEmbedder, HashEmbedder, SlowEmbedder, wait_until
from tiermem.clock import ManualClock
from tiermem.messages import Message, transcript_line
from tiermem.stores.queue import WorkItem
from tiermem.stores.sqlite import SQLiteStore
from tiermem.stores.validate import message_entry
from tiermem.work.archiver import ArchivedMessage, Archiver, Sink, transcript_sink, working_sink
from tiermem.work.vectors import CONTEXT_WEIGHT, embed_messages
from tiermem.working.memory import WorkingMemory

DIM = 16


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "archive.db", dimension=DIM)
    yield s
    s.close()


class CountingSink:
    """The real transcript sink, recording each batch it is given; raises the first ``fail`` times."""

    def __init__(self, store: SQLiteStore, fail: int = 0) -> None:
        self.write: Sink = transcript_sink(store)
        self.fail = fail
        self.batches: list[int] = []
        self.attempts = 0

    def __call__(self, batch: list[ArchivedMessage], vectors: Any) -> None:
        self.attempts += 1
        if self.fail > 0:
            self.fail -= 1
            raise ConnectionError("database went away (on purpose)")
        self.write(batch, vectors)
        self.batches.append(len(batch))


def stored(store: SQLiteStore, user: str) -> int:
    """Messages of ``user`` in the store's transcript (the sink's destination)."""
    return len(store.transcript.rows(user, limit=10_000))


def items(user: str, n: int, session: str | None = "s", start: int = 0) -> list[ArchivedMessage]:
    out, previous = [], None
    for i in range(start, start + n):
        message = Message("user", f"{user} message {i}")
        out.append(ArchivedMessage(user, message, session, None, previous))
        previous = message.message_id
    return out


def test_transcript_line_names_the_speaker() -> None:
    assert transcript_line(Message("user", "hi")) == "user: hi"
    assert transcript_line(Message("user", "hi", name="Ana")) == "Ana: hi"
    assert transcript_line(Message("assistant", "ok", metadata={"speaker": "Bot"})) == "Bot: ok"


def test_message_entry_and_index_row_keep_time_ids_and_links() -> None:
    when = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    message = Message(
        "tool", "42", tool_call_id="c1", timestamp=when, metadata={"k": 1, "deep": {"x": 1}}
    )
    entry = message_entry(message, "prev-id", "agent")
    assert entry.line == "tool: 42" and entry.agent_id == "agent"
    assert Message.from_json(entry.json) == message  # the transcript keeps it whole
    assert entry.line is not None
    item = WorkItem(1, "u", "s", message, entry.line, entry.agent_id, entry.previous_id, 1)
    row = item.index_row(None)
    assert row.content == "tool: 42" and row.memory_type == "tool" and row.created_at == when
    assert (row.session_id, row.agent_id) == ("s", "agent")
    assert row.metadata == {
        "message_id": message.message_id,
        "role": "tool",
        "k": 1,
        "previous_id": "prev-id",
    }


def test_batches_and_flush(store: SQLiteStore) -> None:
    sink = CountingSink(store)
    archiver = Archiver(sink, HashEmbedder(DIM), batch_size=10, flush_interval=600)
    archiver.submit(items("ana", 25))
    assert archiver.flush(60)  # the partial batch does not wait out the interval
    assert archiver.pending == 0 and stored(store, "ana") == 25
    assert sum(sink.batches) == 25 and max(sink.batches) <= 10
    rows = store.transcript.rows("ana", limit=100)
    by_id = {r.message.message_id: r for r in rows}
    linked = [r for r in rows if r.previous_id is not None]
    assert len(linked) == 24 and all(r.previous_id in by_id for r in linked)
    archiver.close()


def test_a_partial_batch_is_written_after_the_flush_interval(store: SQLiteStore) -> None:
    clock = ManualClock()
    sink = CountingSink(store)
    archiver = Archiver(sink, HashEmbedder(DIM), batch_size=100, flush_interval=60, clock=clock)
    archiver.submit(items("ana", 3))
    assert clock.settle() and stored(store, "ana") == 0  # waiting for company
    clock.advance(60)
    assert wait_until(lambda: stored(store, "ana") == 3, 5)
    archiver.close()


def test_one_embed_call_per_batch(store: SQLiteStore) -> None:
    embedder = HashEmbedder(DIM)
    archiver = Archiver(CountingSink(store), embedder, batch_size=8, flush_interval=1.0)
    archiver.submit(items("ana", 16))
    assert archiver.flush(10)
    assert [len(c) for c in embedder.calls] in ([8, 8], [8, 4, 4], [8, 8])  # never one per message
    assert len(embedder.calls) <= 3
    archiver.close()


def test_a_failing_sink_is_retried_and_nothing_is_lost(store: SQLiteStore) -> None:
    sink = CountingSink(store, fail=2)
    archiver = Archiver(sink, HashEmbedder(DIM), batch_size=5, retry_backoff=0.02)
    archiver.submit(items("ana", 12))
    archiver.submit(items("ben", 3))
    assert archiver.flush(10)
    assert archiver.failures == 2 and "on purpose" in str(archiver.last_error)
    assert stored(store, "ana") == 12 and stored(store, "ben") == 3
    rows = store.transcript.rows("ana", limit=100)
    assert len({r.message.message_id for r in rows}) == 12  # no duplicates from the retries
    assert sink.attempts == len(sink.batches) + 2
    archiver.close()


def test_order_is_kept_across_a_retry(store: SQLiteStore) -> None:
    seen: list[str] = []
    write = transcript_sink(store)
    failures = [1]

    def sink(batch: list[ArchivedMessage], vectors: Any) -> None:
        if failures[0]:
            failures[0] -= 1
            raise OSError("once")
        seen.extend(i.message.text for i in batch)
        write(batch, vectors)

    archiver = Archiver(sink, HashEmbedder(DIM), batch_size=4, retry_backoff=0.01)
    archiver.submit(items("ana", 10))
    assert archiver.flush(10)
    assert seen == [f"ana message {i}" for i in range(10)]
    archiver.close()


def test_a_failing_embedder_keeps_the_batch_pending(store: SQLiteStore) -> None:
    embedder = FailingEmbedder(RuntimeError("model crashed"), ok_calls=0, dimension=DIM)
    archiver = Archiver(CountingSink(store), embedder, batch_size=4, retry_backoff=0.02)
    archiver.submit(items("ana", 6))
    assert wait_until(lambda: archiver.failures >= 2)
    assert archiver.pending == 6 and archiver.flush(0.1) is False
    embedder.ok_calls = 100
    assert archiver.flush(10) and stored(store, "ana") == 6
    archiver.close()


def test_discard_user_drops_only_that_users_queue(store: SQLiteStore) -> None:
    clock = ManualClock()
    sink = CountingSink(store, fail=1)
    archiver = Archiver(
        sink, HashEmbedder(DIM), batch_size=100, flush_interval=0, retry_backoff=1, clock=clock
    )
    archiver.submit(items("ana", 5) + items("ben", 4) + items("ana", 2, start=5))
    assert wait_until(lambda: archiver.failures == 1)  # the batch is back in the queue
    assert archiver.discard_user("ana") == 7
    assert archiver.discard_user("ana") == 0
    assert archiver.pending == 4
    clock.advance(1)  # the backoff is over
    assert archiver.flush(10)
    assert stored(store, "ana") == 0 and stored(store, "ben") == 4
    archiver.close()


def test_close_writes_what_is_queued_and_stops_the_thread(store: SQLiteStore) -> None:
    archiver = Archiver(CountingSink(store), HashEmbedder(DIM), batch_size=1000, flush_interval=600)
    archiver.submit(items("ana", 30))
    archiver.close(timeout=60)  # writes at once: never waits out the interval
    assert stored(store, "ana") == 30
    assert not any(t.name == "tiermem-archiver" and t.is_alive() for t in _threads(archiver))
    with pytest.raises(RuntimeError, match="closed"):
        archiver.submit(items("ana", 1))
    archiver.close()  # idempotent


def _threads(archiver: Archiver) -> list[threading.Thread]:
    thread = archiver._runner._thread
    return [thread] if thread is not None else []


def test_close_with_a_timeout_returns_while_the_sink_still_fails(store: SQLiteStore) -> None:
    sink = CountingSink(store, fail=10**6)
    archiver = Archiver(sink, HashEmbedder(DIM), retry_backoff=0.01)
    archiver.submit(items("ana", 3))
    archiver.close(timeout=0.3)  # returns, though nothing could be written
    assert sink.attempts > 0 and archiver.pending == 3  # never dropped, only not written
    assert wait_until(lambda: not archiver._runner.running, 3)


def test_an_idle_archiver_starts_no_thread(store: SQLiteStore) -> None:
    archiver = Archiver(CountingSink(store), HashEmbedder(DIM))
    assert archiver._runner._thread is None and archiver.flush(0.1)
    archiver.close()


def test_submit_returns_at_once_while_embedding_is_slow(store: SQLiteStore) -> None:
    embedder = SlowEmbedder(delay=60, dimension=DIM)  # answers only when released
    archiver = Archiver(CountingSink(store), embedder, batch_size=2)
    for i in range(20):
        archiver.submit(items("ana", 1, start=i))
    assert embedder.calls == [] and stored(store, "ana") == 0  # submitted, none embedded yet
    embedder.release.set()
    assert archiver.flush(10) and stored(store, "ana") == 20
    archiver.close()


def test_concurrent_submitters(store: SQLiteStore) -> None:
    archiver = Archiver(CountingSink(store), HashEmbedder(DIM), batch_size=16)
    users = [f"user{i}" for i in range(4)]

    def submit(user: str) -> None:
        for start in range(0, 40, 5):
            archiver.submit(items(user, 5, start=start))

    threads = [threading.Thread(target=submit, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert archiver.flush(20)
    assert [stored(store, u) for u in users] == [40] * 4
    archiver.close()


def test_working_sink(store: SQLiteStore) -> None:
    embedder = HashEmbedder(DIM)
    working = WorkingMemory(embedder=embedder, fifo_interval_min=None, user_isolation=True)
    archiver = Archiver(working_sink(working), embedder)
    archiver.submit(items("ana", 3) + items("ben", 2))
    assert archiver.flush(10)
    assert working.stats("ana").items == 3 and working.stats("ben").items == 2
    hits = working.search("ana message 1", k=3, user_id="ana")
    assert hits[0].content == "user: ana message 1" and hits[0].session_id == "s"
    assert all(h.user_id == "ana" for h in hits)
    archiver.close()
    working.close()


def test_context_vectors_never_mix_users_with_the_same_message_ids() -> None:
    written: dict[tuple[str, str], Any] = {}

    def sink(batch: list[ArchivedMessage], vectors: Any) -> None:
        for item, vector in zip(batch, vectors, strict=True):
            written[(item.user_id, item.message.message_id)] = vector

    embedder = HashEmbedder(DIM)
    archiver = Archiver(sink, embedder, batch_size=1)
    hello = Message("user", "hello there", message_id="1")
    secret = Message("user", "my bank pin is 4471", message_id="1")
    follow = Message("user", "how are you", message_id="2")
    archiver.submit([ArchivedMessage("bob", hello, "s", None, None)])
    archiver.submit([ArchivedMessage("ana", secret, "s", None, None)])
    archiver.submit([ArchivedMessage("bob", follow, "s", None, "1")])
    assert archiver.flush(10)
    archiver.close()
    own = embed_messages(embedder, [follow])[0]
    expected = own + CONTEXT_WEIGHT * embed_messages(embedder, [hello])[0]
    expected /= np.linalg.norm(expected)
    assert np.allclose(written[("bob", "2")], expected, atol=1e-6)
