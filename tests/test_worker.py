"""The store worker: it indexes the line it claimed, and embeds each distinct line once."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from embedders import HashEmbedder
from fakeserver import FakeServer
from tiermem.embeddings.openai import OpenAIEmbedder
from tiermem.errors import ProviderUnavailableError
from tiermem.memory import Memory
from tiermem.messages import Message
from tiermem.stores.sqlite import SQLiteStore
from tiermem.work.worker import StoreWorker

DIM = 32


class SentTexts(HashEmbedder):
    """Records every text the worker sends (before any deduplication of the embedder)."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.sent: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.sent += texts
        return super().embed(texts)


def test_identical_lines_are_hashed_and_embedded_once(tmp_path: Path) -> None:
    embedder = SentTexts()
    with SQLiteStore(tmp_path / "m.db", dimension=DIM) as store:
        for user in ("ana", "bo"):
            said = ["ok", "the tide was low", "ok", "we walked to the lighthouse"]
            store.transcript.append(user, "s", [Message("user", text) for text in said])
        worker = StoreWorker(store, embedder, background=False)
        assert worker.run_once() == 8
        assert sorted(embedder.sent) == [
            "user: ok",
            "user: the tide was low",
            "user: we walked to the lighthouse",
        ]
        for user in ("ana", "bo"):  # each user's lines indexed once, with their own links
            rows = store.index.list(user, limit=10)
            assert sorted(r.content for r in rows) == sorted(set(embedder.sent))
            assert all(r.memory_type == "message" and r.session_id == "s" for r in rows)
            assert store.queue.work_stats(user).done == 4


def test_end_session_waits_for_another_process_folding_the_session(tmp_path: Path) -> None:
    """Another worker holds the session's summary lease (it is folding it): end_session
    waits for the lease instead of returning no summary (it did, under load)."""
    from tiermem.memory import Memory

    config = {"memory": {"worker": {"background": False}}}
    with Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32)) as memory:
        for day in range(6):
            memory.add("user", f"On day {day} I planted tomato seedlings.", "u", "s")
        assert memory.store.queue.summary_due("another-process", "u", "s", 0, 1, 1.0) is not None
        summary = memory.end_session("u", "s")
        assert summary is not None and "tomato" in summary


class FlakyEmbedder:
    """A user's own embedder class (not a tiermem base class): it raises Python's
    ConnectionError while its service is down, as a client of one's own would."""

    model_id = "mine/flaky"
    dimension = DIM

    def __init__(self) -> None:
        self.inner = HashEmbedder(DIM)
        self.down_until = 0.0
        self.refused = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if time.monotonic() < self.down_until:
            self.refused += 1
            raise ConnectionError("[Errno 111] Connection refused")
        return self.inner.embed(texts)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


def test_an_embedder_of_ones_own_raising_connection_errors_fails_no_message(
    tmp_path: Path,
) -> None:
    """Messages keep arriving while a user's embedder raises ConnectionError for 2.5 s:
    the worker takes it for the embedder being down (as a timeout, 429 or 5xx): it gives
    the rows back with backoff, marks none failed, and indexes every one once it is back.
    A read meanwhile gets a typed ProviderUnavailableError."""
    embedder = FlakyEmbedder()
    with Memory(str(tmp_path / "m.db"), embedder=embedder) as memory:
        said = [memory.add("user", f"before the outage {i}", "ana", "s") for i in range(20)]
        assert memory.flush(30) and memory.work_stats().done == 20
        embedder.down_until = time.monotonic() + 2.5
        with pytest.raises(ProviderUnavailableError, match="ConnectionError"):
            memory.search("what was said before the outage", "ana")
        end = time.monotonic() + 3.5
        i = 0
        while time.monotonic() < end:  # real adds, before, during and after the outage
            said.append(memory.add("user", f"line {i} said meanwhile", "ana", "s"))
            i += 1
            time.sleep(0.005)
        assert embedder.refused > 0 and memory.worker.outages > 0
        assert memory.work_stats().failed == 0  # none failed during the outage
        assert memory.flush(60)
        stats = memory.work_stats()
        assert (stats.failed, stats.pending, stats.done) == (0, 0, len(said))
        assert memory.failed("ana") == [] and memory.worker.failures == 0
        indexed = {r.content for r in memory.store.index.list("ana", limit=10_000)}
        assert {f"user: {m.text}" for m in said} <= indexed


@pytest.mark.parametrize("kind", ["a class of one's own", "HTTP"])
def test_rows_are_embedded_soon_after_the_embedder_is_back(
    tmp_path: Path, fake_server: FakeServer, kind: str
) -> None:
    """A 3 s outage under real adds, with every setting at its default: once the embedder
    answers again, every row is embedded within a few seconds and none failed. The rows
    given back wait until the embedder may be tried again (its breaker's probe: 5 s for
    the HTTP embedder; 1 s for a class without a breaker), however long the outage has
    lasted; before, the wait doubled with each batch given back, to 30 s."""
    flaky = FlakyEmbedder()
    http = OpenAIEmbedder("m", base_url=fake_server.openai_url, dimensions=8, max_retries=0)
    embedder = flaky if kind.endswith("own") else http
    with Memory(str(tmp_path / "m.db"), embedder=embedder) as memory:
        said = [memory.add("user", f"before the outage {i}", "ana", "s") for i in range(5)]
        assert memory.flush(30)
        flaky.down_until = time.monotonic() + 3
        fake_server.stop()  # connection refused
        while time.monotonic() < flaky.down_until:  # real adds during the outage
            said.append(memory.add("user", f"line {len(said)} said meanwhile", "ana", "s"))
            time.sleep(0.02)
        fake_server.start()
        back = time.monotonic()
        while memory.work_stats().done < len(said):  # the background worker alone
            assert time.monotonic() - back < 30, "timed out"
            time.sleep(0.05)
        took = time.monotonic() - back
        assert memory.worker.outages > 0 and memory.work_stats().failed == 0
        bound = 5 + 3 if embedder is http else 1 + 3  # the probe's wait + a loose margin
        print(f"{kind}: every row embedded {took:.1f}s after the embedder was back")
        assert took < bound, f"{took:.1f}s after the embedder was back"


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_each_indexed_line_carries_its_token_count(tmp_path: Path, engine: str) -> None:
    """The worker counts each line it indexes (a message's, each passage's) with the
    Memory's counter and stores the count with it; what the store returns gives it back
    for the planner, so a context does not count those lines again."""
    from conformance.conftest import _server_url
    from tiermem.memory.retrieval import _record_fields
    from tiermem.tokens import LINE_TOKENS, get_token_counter

    counter = get_token_counter("gpt-4o")
    persistent = (
        {"path": str(tmp_path / "m.db")}
        if engine == "sqlite"
        else {"provider": "postgresql", "connection_string": _server_url()}
    )
    long = "\n\n".join(
        f"Step {n}: move the {n}th table to the new schema, then check its indexes and "
        "its foreign keys against the old one before the next step." * 3
        for n in range(12)
    )
    user = f"counted-{time.time_ns()}"
    config = {"memory": {"persistent": persistent}}
    with Memory(config=config, embedder=HashEmbedder(DIM), token_counter=counter) as memory:
        memory.add("user", "the tide was low", user, "s")
        memory.add("assistant", long, user, "s")
        memory.flush()
        rows = memory.store.index.list(user, limit=100)
        assert {r.memory_type for r in rows} == {"message", "passage"}
        for row in rows:
            name, tokens, _ = row.metadata[LINE_TOKENS]
            assert (name, tokens) == (counter.name, counter.count(row.content + "\n"))
            assert _record_fields(row)[-1] == (counter.name, tokens)
        message = next(r for r in rows if r.memory_type == "message")
        vector = HashEmbedder(DIM).embed(["user: the tide was high"])[0]
        changed = memory.store.index.update(
            user, message.id, content="user: the tide was high", embedding=vector
        )
        assert changed.metadata[LINE_TOKENS] == message.metadata[LINE_TOKENS]
        assert _record_fields(changed)[-1] is None  # the stored count is not this line's
        memory.forget_user(user)


def test_a_counter_that_fails_never_holds_up_indexing(tmp_path: Path) -> None:
    """Counting a line's tokens saves a context time; when the counter raises (a damaged
    encoding file fails at the first count), every row is indexed all the same, without
    counts, and the counter is not tried again."""
    from tiermem.errors import ModelLoadError
    from tiermem.tokens import LINE_TOKENS, ApproxTokenCounter

    class Failing(ApproxTokenCounter):
        calls = 0

        def count(self, text: str) -> int:
            Failing.calls += 1
            raise ModelLoadError("the encoding file is damaged")

    long = "\n\n".join(f"Step {n}: move the {n}th table to the new schema. " * 12 for n in range(8))
    with SQLiteStore(tmp_path / "m.db", dimension=DIM) as store:
        said = [Message("user", "the tide was low"), Message("assistant", long)]
        store.transcript.append("ana", "s", said)
        worker = StoreWorker(store, HashEmbedder(DIM), background=False, counter=Failing())
        assert worker.run_once() == 2
        rows = store.index.list("ana", limit=100)
        assert {r.memory_type for r in rows} == {"message", "passage"}
        assert not any(LINE_TOKENS in r.metadata for r in rows)
        assert store.queue.work_stats("ana").done == 2
        assert Failing.calls == 1 and worker.counter is None
