"""Seed 001 (MUXI memory internals): its code snippets, run against tiermem.

Where the seed shows code, the test calls it as written with only the imports changed:
``BufferMemory(size=50, multiplier=10)``, ``WorkingMemory(dimension=384)`` with
``search(query, k)`` and ``cleanup()``, ``calculate_importance(memory)``,
``get_context(query, user_id)`` and ``generate_synopsis(user_id)`` (methods of
:class:`~tiermem.Memory`, which owns the tiers the seed's functions reach for), and the
"Configuration Reference" YAML through ``Memory.from_config`` (its parse alone is
tested in test_seed001_config.py).

Differences, documented here as tests: the seed's ``messages`` deque is a ring of
``size`` messages that evicts one at a time, and evicted messages are summarized in
batches of 10 (the seed's "Summarize [1-10]"), so after message 51 the window holds
2..51 and after message 60 the summary of 1..10 is in ``summaries``.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from conformance.conftest import _server_url
from embedders import HashEmbedder, minilm
from fakeserver import FakeServer

from .test_seed001_config import SEED_CONFIGURATION_REFERENCE


def test_buffer_memory_size_and_multiplier() -> None:
    from tiermem.buffer import BufferMemory

    buffer = BufferMemory(size=50, multiplier=10)
    assert buffer.size == 50 and buffer.buffer_size == 50
    assert buffer.summaries.maxlen == 50 * 10  # self.summaries = deque(maxlen=size * multiplier)
    assert len(buffer.messages) == 0


def test_buffer_overflow_summarizes_the_oldest_batch() -> None:
    from tiermem.buffer import BufferMemory
    from tiermem.summaries import ExtractiveSummarizer

    buffer = BufferMemory(size=50, multiplier=10, summarizer=ExtractiveSummarizer())
    for i in range(1, 52):  # Messages: [1, 2, 3, ..., 50, 51] <- overflow!
        buffer.add_message("user", f"message {i}: the user discussed project setup")
    assert len(buffer.messages) == 50  # a ring: deque(maxlen=size)
    assert buffer.messages[0].text.startswith("message 2:")
    for i in range(52, 61):
        buffer.add_message("user", f"message {i}: the user discussed project setup")
    assert buffer.summary is not None  # the offline summarizer's batch of 10, waited for
    assert len(buffer.summaries) == 1  # Summaries: ["User discussed project setup..."]
    summary = buffer.summaries[0]
    assert "message 1:" in summary and "message 10:" in summary and "message 11:" not in summary
    assert [m.text.split(":")[0] for m in buffer.messages] == [
        f"message {i}" for i in range(11, 61)
    ]
    # Get recent N: O(N) slice from the deque
    assert [m.text.split(":")[0] for m in buffer.get_recent(3)] == [
        "message 58",
        "message 59",
        "message 60",
    ]


def test_summaries_ring_keeps_size_times_multiplier() -> None:
    from tiermem.buffer import BufferMemory
    from tiermem.summaries import ExtractiveSummarizer, SummaryPolicy

    buffer = BufferMemory(
        size=2,
        multiplier=2,
        summarizer=ExtractiveSummarizer(),
        summary_policy=SummaryPolicy(batch_size=1),
    )
    for i in range(12):
        buffer.add_message("user", f"fact number {i}")
    assert buffer.flush(10)
    assert buffer.summaries.maxlen == 4 and len(buffer.summaries) == 4
    assert "fact number 9" in buffer.summaries[-1]  # newest last, oldest dropped


@pytest.fixture
def working() -> Iterator[object]:
    from tiermem.working import WorkingMemory

    memory = WorkingMemory(dimension=384, embedder=HashEmbedder(384))
    yield memory
    memory.close()


def test_working_memory_add_and_search(working: object) -> None:
    from tiermem.working import WorkingMemory

    assert isinstance(working, WorkingMemory)
    assert working.dimension == 384
    working.add("tool output: the build passed on linux", {"source": "ci"})
    working.add("user info: prefers dark mode")
    results = working.search("did the linux build pass?", k=5)
    assert results[0].content == "tool output: the build passed on linux"
    assert results[0].metadata["source"] == "ci" and results[0].timestamp > 0


def test_working_memory_fifo_cleanup() -> None:
    from tiermem.working import WorkingMemory

    memory = WorkingMemory(dimension=384, max_memory_mb=0.01, embedder=HashEmbedder(384))
    for i in range(40):
        memory.add(f"note {i}")
    memory.cleanup()  # while self.size_mb > self.max_memory_mb: remove the oldest
    assert memory.size_mb <= memory.max_memory_mb
    kept = {item.content for item in memory.search("note", k=40)}
    assert "note 39" in kept and "note 0" not in kept
    memory.close()


@pytest.mark.slow
def test_working_memory_with_the_local_model() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tiermem.working import WorkingMemory

    minilm()  # load the packaged model once for the session
    memory = WorkingMemory(dimension=384)  # the default embedder: local all-MiniLM-L6-v2
    memory.add("The deployment failed because the disk was full")
    memory.add("The user likes Italian food")
    results = memory.search("why did the release break?", k=5)
    assert results[0].content == "The deployment failed because the disk was full"
    memory.close()


def test_calculate_importance() -> None:
    from tiermem.stores.records import calculate_importance
    from tiermem.types.records import MemoryRecord, utcnow

    now = utcnow()
    memory = MemoryRecord(id=uuid.uuid4(), user_id="u", content="x", created_at=now)
    # recency 1, access_frequency log(0 + 1) = 0, explicit_importance 0.5
    assert calculate_importance(memory, now=now) == pytest.approx(0.3 * 1 + 0.3 * 0 + 0.4 * 0.5)
    old = MemoryRecord(
        id=memory.id,
        user_id="u",
        content="x",
        created_at=now - timedelta(days=30),
        access_count=9,
        importance=1.0,
    )
    frequency = math.log(10) / math.log(101)  # log(access_count + 1), scaled to [0, 1]
    assert calculate_importance(old, now=now) == pytest.approx(0.3 * 0.5 + 0.3 * frequency + 0.4)
    assert calculate_importance(old, now=now) > calculate_importance(memory, now=now)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[object]:
    from tiermem import Memory

    m = Memory(str(tmp_path / "seed001.db"), embedder=HashEmbedder(64))
    yield m
    m.close()


def test_get_context_query_user_id(memory: object) -> None:
    from tiermem.memory import Memory

    assert isinstance(memory, Memory)
    user_id = "u1"
    memory.remember("The user is called Sam and prefers short answers", user_id, "preference")
    for i in range(12):
        memory.add(
            "user" if i % 2 == 0 else "assistant", f"we talked about budgets, part {i}", user_id
        )
    memory.remember("The project deadline is Friday", user_id, "fact")
    assert memory.flush(10)

    query = "when is the project deadline? we talked about budgets, part 3"
    context = memory.get_context(query, user_id)  # the floor keeps what is relevant

    sections = {item.section for item in context.items}
    assert {"recent", "retrieved", "synopsis"} <= sections  # steps 1, 2 and 3
    assert "The project deadline is Friday" in context.text()
    assert any("budgets" in i.content for i in context.items if i.section == "retrieved")
    assert context.total_tokens <= 4000  # fit_to_window(..., max_tokens=4000)
    texts = [item.content for item in context.items]
    assert len(texts) == len(set(texts))  # step 4: deduplicated


def test_generate_synopsis_user_id(memory: object) -> None:
    from tiermem.memory import Memory

    assert isinstance(memory, Memory)
    user_id = "u2"
    memory.remember("My name is Priya", user_id, "fact", 0.9)
    memory.remember("Priya prefers vegetarian recipes", user_id, "preference", 0.7)
    memory.remember("Currently planning a trip to Kyoto", user_id, "context", 0.6)

    synopsis = memory.generate_synopsis(user_id)

    assert "My name is Priya" in synopsis.identity and "vegetarian" in synopsis.identity
    assert "Kyoto" in synopsis.context
    cache = memory.synopses.cache
    assert cache.ttls == {"identity": 7 * 24 * 3600, "context": 3600}
    assert (
        cache.get(user_id, "identity").text == synopsis.identity
    )  # cache.set(f"identity:{user_id}", ...)
    assert cache.get(user_id, "context").text == synopsis.context


def _embed_1536(texts: list[str]) -> list[list[float]]:
    return HashEmbedder(1536).embed(texts).tolist()  # type: ignore[no-any-return]


def test_configuration_reference_builds_a_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed's YAML as written: PostgreSQL from the secret, OpenAI embeddings (a local
    server speaking the OpenAI protocol), buffer and synopsis settings."""
    from tiermem import Memory
    from tiermem.stores.postgres import PostgresStore

    with FakeServer(api_key="sk-test", embed=_embed_1536) as server:
        monkeypatch.setenv("POSTGRES_URI", os.environ.get("TIERMEM_TEST_PG_URL") or _server_url())
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        memory = Memory.from_config(SEED_CONFIGURATION_REFERENCE)
        try:
            assert isinstance(memory.store, PostgresStore)
            assert memory.store.table == "memories_1536"  # openai/text-embedding-3-small
            assert memory.config.memory.buffer.size == 50
            assert memory.synopses.cache.ttls == {"identity": 604800, "context": 3600}
            user_id = f"seed001-{os.getpid()}-{id(memory)}"
            memory.remember("The user's favourite editor is Helix", user_id)
            memory.add("user", "I switched editors last week", user_id)
            assert memory.flush(10)
            assert memory.store.index.count(user_id) == 2
            assert "Helix" in memory.get_context("which editor do I use?", user_id).text()
            assert any(r.path == "/v1/embeddings" for r in server.requests)
            memory.forget_user(user_id)
        finally:
            memory.close()
