"""One behaviour suite, run against the embedded :class:`Memory` and against
:class:`MemoryClient` talking to a real server (uvicorn on loopback) that serves the same
kind of Memory: same arguments, same return types, same typed errors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.client import AsyncMemoryClient, MemoryClient
from tiermem.errors import (
    ContentTooLargeError,
    InputError,
    InvalidRoleError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
)
from tiermem.memory import Memory
from tiermem.messages import Message
from tiermem.planner import SECTIONS, Context
from tiermem.server import create_app
from tiermem.stores.base import MemoryRecord, SearchResult
from tiermem.stores.transcript import SessionInfo, WorkStats
from tiermem.synopsis import Synopsis

CONFIG = {"memory": {"buffer": {"size": 8, "summary_batch": 4}}}


def new_memory(path: Path) -> Memory:
    return Memory(str(path / "memory.db"), config=CONFIG, embedder=HashEmbedder(32))


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    memory = new_memory(tmp_path_factory.mktemp("served"))
    with live_server(create_app(memory)) as url:
        yield url
    memory.close()


@pytest.fixture(params=["embedded", "client"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "embedded":
        m: Any = new_memory(tmp_path)
    else:
        m = MemoryClient(request.getfixturevalue("server_url"))
    yield m
    m.close()


@pytest.fixture
def user() -> str:
    return f"user/{uuid.uuid4().hex[:8]} é"  # a slash, a space and non-ASCII on purpose


def test_add_returns_the_message_and_it_is_stored(memory: Any, user: str) -> None:
    message = memory.add("user", "I adopted a cat called Miso", user, "s1", name="Ann")
    assert isinstance(message, Message)
    assert (message.role, message.name, message.metadata["user_id"]) == ("user", "Ann", user)
    assert memory.flush(10)
    stored = memory.list_memories(user, memory_type="message")
    assert [r.metadata["message_id"] for r in stored] == [message.message_id]
    assert stored[0].user_id == user and stored[0].session_id == "s1"
    assert isinstance(stored[0], MemoryRecord)


def test_add_messages_keeps_order_ids_and_openai_fields(memory: Any, user: str) -> None:
    history = [
        {"role": "user", "content": "What is the weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "content": "4 degrees and rain", "tool_call_id": "call_1"},
        Message("assistant", "It is 4 degrees and raining in Oslo."),
    ]
    added = memory.add_messages(history, user, "trip")
    assert [m.role for m in added] == ["user", "assistant", "tool", "assistant"]
    assert added[1].tool_calls[0]["function"]["name"] == "weather"
    assert added[3].message_id == history[3].message_id
    memory.flush(10)
    context = memory.get_context("weather in Oslo", user, "trip")
    recent = [m for m in context.messages if m.get("role") == "tool"]
    assert recent and recent[0]["tool_call_id"] == "call_1"


def test_sessions_history_and_work(memory: Any, user: str) -> None:
    first = memory.add("user", "the first session starts", user, "a")
    memory.add_messages(
        [{"role": "user", "content": "same line"}, {"role": "user", "content": "same line"}],
        user,
        "b",
    )
    memory.add("assistant", {"answer": 42}, user, "b")
    memory.flush(10)
    sessions = memory.sessions(user)
    assert [(s.session_id, s.messages) for s in sessions] == [("b", 3), ("a", 1)]
    assert all(isinstance(s, SessionInfo) and s.first <= s.last for s in sessions)
    history = memory.history(user, "b")
    assert [m.content for m in history] == ["same line", "same line", {"answer": 42}]
    assert memory.history(user, "a")[0].message_id == first.message_id
    assert memory.history(user, "a")[0].metadata["user_id"] == user
    stats = memory.work_stats(user)
    assert isinstance(stats, WorkStats) and (stats.pending, stats.done, stats.failed) == (0, 4, 0)
    assert memory.failed(user) == [] and memory.retry_failed(user) == 0


def test_remember_search_and_filters(memory: Any, user: str) -> None:
    tea = memory.remember("prefers green tea over coffee", user, "preference", 0.9)
    memory.remember("works as a nurse in Bergen", user, "fact", metadata={"source": "chat"})
    assert isinstance(tea, str) and uuid.UUID(tea)
    hits = memory.search("green tea", user, k=5)
    assert hits and all(isinstance(h, SearchResult) for h in hits)
    assert str(hits[0].record.id) == tea and hits[0].record.user_id == user
    assert hits[0].record.importance == 0.9
    facts = memory.search("nurse tea", user, filters={"memory_type": "fact"}, mode="keyword")
    assert [h.record.content for h in facts] == ["works as a nurse in Bergen"]
    assert facts[0].record.metadata == {"source": "chat"}


def test_context_is_explained_and_within_budget(memory: Any, user: str) -> None:
    memory.remember("is allergic to peanuts", user, "fact", 0.9)
    for i in range(12):
        memory.add(
            "user" if i % 2 == 0 else "assistant", f"message number {i} about cooking", user, "s"
        )
    memory.flush(10)
    context = memory.get_context("what food allergy", user, "s", max_tokens=200)
    assert isinstance(context, Context)
    assert context.total_tokens <= context.max_tokens == 200
    assert context.items and {i.section for i in context.items} <= set(SECTIONS)
    assert all(i.tokens > 0 and isinstance(i.score, float) for i in context.items)
    assert "peanuts" in context.text()
    assert "message number 11 about cooking" in context.text()
    assert context.to_anthropic()[1]


def test_synopsis(memory: Any, user: str) -> None:
    memory.remember("likes hiking in the mountains", user, "preference")
    synopsis = memory.synopsis(user)
    assert isinstance(synopsis, Synopsis) and synopsis.user_id == user
    assert "hiking" in synopsis.render()


def test_forget_and_store_editing(memory: Any, user: str) -> None:
    memory_id = memory.remember("lives in Lyon", user)
    updated = memory.update_memory(memory_id, user, content="lives in Paris", importance=0.7)
    assert (updated.content, updated.importance) == ("lives in Paris", 0.7)
    assert memory.get_memory(memory_id, user).content == "lives in Paris"
    assert memory.forget(memory_id, "someone else") is False
    assert memory.forget(memory_id, user) is True
    assert memory.forget(memory_id, user) is False
    assert memory.get_memory(memory_id, user) is None


def test_forget_user_erases_everything(memory: Any, user: str) -> None:
    memory.remember("has two children", user)
    memory.add("user", "my kids love football", user, "s")
    memory.flush(10)
    assert memory.forget_user(user) == 2
    assert memory.search("children football", user) == []
    assert memory.stats(user).count == 0


@pytest.mark.parametrize(
    ("call", "error", "field"),
    [
        (lambda m, u: m.add("robot", "hi", u), InvalidRoleError, "role"),
        (lambda m, u: m.add("user", "hi", ""), MissingUserError, "user_id"),
        (lambda m, u: m.add("user", "x" * 1_100_000, u), ContentTooLargeError, "content"),
        (lambda m, u: m.add_messages({"role": "user"}, u), InvalidTypeError, "messages"),
        (lambda m, u: m.remember("x", u, importance=2.0), InvalidSizeError, "importance"),
        (lambda m, u: m.remember("x", u, memory_type="gossip"), InputError, "memory_type"),
        (lambda m, u: m.remember("   ", u), InputError, "content"),
        (lambda m, u: m.search("tea", u, k=0), InvalidSizeError, "limit"),
        (lambda m, u: m.get_context("tea", u, max_tokens=0), InvalidSizeError, "max_tokens"),
        (lambda m, u: m.forget("not-a-uuid", u), InputError, "memory_id"),
    ],
)
def test_typed_errors(memory: Any, user: str, call: Any, error: type, field: str) -> None:
    with pytest.raises(error) as raised:
        call(memory, user)
    assert raised.value.field.endswith(field)  # the store names memories[0].importance


async def test_async_client_matches(server_url: str, user: str) -> None:
    async with AsyncMemoryClient(server_url) as client:
        memory_id = await client.aremember("plays the cello", user, "fact")
        await client.aadd("user", "I practised the cello today", user, "s")
        assert await client.aflush(10)
        hits = await client.asearch("cello", user)
        assert memory_id in {str(h.record.id) for h in hits}
        context = await client.aget_context("cello", user, "s")
        assert "cello" in context.text()
        with pytest.raises(InvalidRoleError):
            await client.aadd("robot", "x", user)
        assert await client.aforget(memory_id, user)
        assert await client.aforget_user(user) >= 1
