"""The contract's batch write and metadata listing, and the patterns over it: the same
calls, results and typed errors from the embedded :class:`Memory` (on SQLite and on
PostgreSQL) and from :class:`MemoryClient` talking to a real server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from conformance.conftest import fresh_store_database
from embedders import HashEmbedder
from liveserver import live_server
from tiermem.client import AsyncMemoryClient, MemoryClient
from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError, SerializationError
from tiermem.memory import Memory
from tiermem.messages import Message
from tiermem.patterns import CoordinatedMemorySystem, MemoryManager
from tiermem.server import create_app
from tiermem.stores.postgres import PostgresStore


def new_memory(path: Path) -> Memory:
    return Memory(str(path / "memory.db"), embedder=HashEmbedder(32))


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    memory = new_memory(tmp_path_factory.mktemp("served"))
    with live_server(create_app(memory)) as url:
        yield url
    memory.close()


@pytest.fixture(params=["sqlite", "postgres", "client"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        m: Any = new_memory(tmp_path)
    elif request.param == "postgres":
        store = PostgresStore(fresh_store_database(32), dimension=32, embedder=HashEmbedder(32))
        m = Memory(store=store, embedder=HashEmbedder(32))
    else:
        m = MemoryClient(request.getfixturevalue("server_url"))
    yield m
    m.close()
    if request.param == "postgres":
        store.close()


@pytest.fixture
def user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def test_remember_many_stores_all_in_order_with_their_times(memory: Any, user: str) -> None:
    when = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    ids = memory.remember_many(
        [
            {"content": "likes green tea", "memory_type": "preference", "importance": 0.8},
            {"content": "moved to Lyon", "created_at": when, "metadata": {"kind": "move"}},
            {"content": "likes green tea"},  # known content: the same id
        ],
        user,
    )
    assert len(ids) == 3 and ids[0] == ids[2] and ids[0] != ids[1]
    moved = memory.get_memory(ids[1], user)
    assert (moved.content, moved.memory_type, moved.created_at) == ("moved to Lyon", "fact", when)
    tea = memory.get_memory(ids[0], user)
    assert (tea.memory_type, tea.importance) == ("preference", 0.8)
    assert ids[1] in {str(h.record.id) for h in memory.search("Lyon", user)}


@pytest.mark.parametrize(
    ("items", "error", "field"),
    [
        ([], InputError, "memories"),
        ([{"content": "ok"}, {"content": "   "}], InputError, "content"),
        ([{"content": "ok"}, {}], InputError, "content"),
        ([{"content": "ok"}, {"content": "x", "colour": "red"}], InputError, "colour"),
        ([{"content": "ok"}, {"content": "x", "importance": 2.0}], InvalidSizeError, "importance"),
        ([{"content": "ok"}, {"content": "x", "memory_type": "gossip"}], InputError, "memory_type"),
        ([{"content": "ok"}, "text"], InputError, "1"),
    ],
)
def test_remember_many_is_all_or_nothing(
    memory: Any, user: str, items: Any, error: type, field: str
) -> None:
    with pytest.raises(error) as raised:
        memory.remember_many(items, user)
    # the library names memories[1].content, the server's schema memories.1.content
    assert raised.value.field.replace("[", ".").rstrip("]").endswith(field)  # type: ignore[attr-defined]
    assert memory.list_memories(user) == []


def test_list_memories_by_metadata(memory: Any, user: str) -> None:
    note = memory.remember("bring the charger", user, metadata={"kind": "note", "n": 3})
    memory.remember("call the bank", user, metadata={"kind": "todo", "n": 3})
    assert [str(r.id) for r in memory.list_memories(user, metadata={"kind": "note"})] == [note]
    assert len(memory.list_memories(user, metadata={"n": 3})) == 2
    assert memory.list_memories(user, metadata={"kind": "note", "n": 4}) == []
    assert len(memory.list_memories(user, metadata={})) == 2
    with pytest.raises(InvalidTypeError) as raised:
        memory.list_memories(user, metadata={"kind": ["note"]})
    assert raised.value.field == "metadata.kind"
    with pytest.raises(InvalidTypeError):
        memory.list_memories(user, metadata=["kind"])


def test_rest_metadata_parameter_is_a_json_object(server_url: str, user: str) -> None:
    with httpx.Client(base_url=server_url) as http:
        http.post("/v1/memories", json={"user_id": user, "content": "a", "metadata": {"k": 1}})
        page = http.get("/v1/memories", params={"user_id": user, "metadata": '{"k": 1}'})
        assert [m["content"] for m in page.json()["memories"]] == ["a"]
        for bad, kind in (("{", SerializationError), ("[1]", InvalidTypeError)):
            answer = http.get("/v1/memories", params={"user_id": user, "metadata": bad})
            assert answer.status_code == 422
            assert (answer.json()["error"], answer.json()["field"]) == (kind.__name__, "metadata")


async def test_async_client_batch_and_metadata(server_url: str, user: str) -> None:
    async with AsyncMemoryClient(server_url) as client:
        ids = await client.aremember_many([{"content": "x", "metadata": {"k": "v"}}], user)
        found = await client.alist_memories(user, metadata={"k": "v"})
        assert [str(r.id) for r in found] == ids


def test_patterns_run_on_any_face(memory: Any, user: str) -> None:
    """The patterns call the contract only: a client does what the library does."""
    manager = MemoryManager("persistent", max_messages=2, memory=memory, user_id=user)
    conv = manager.get_memory("a")
    for text in ("one", "two", "three"):
        conv.add_message(Message("user", text))
    assert manager.save() == 3
    restored = MemoryManager("persistent", memory=memory, user_id=user).get_memory("a")
    assert [m.content for m in restored.get_messages()] == ["two", "three"]
    assert manager.forget("a") == 4
    system = CoordinatedMemorySystem(memory=memory, user_id=user)
    system.register_fact("finance", "the budget cap is 40k euros")
    system.register_fact("research", "the launch is in october")
    again = CoordinatedMemorySystem(memory=memory, user_id=user)
    found = again.get_agent_context("writer", query="budget cap euros", k=1)
    assert [m.content for m in found] == ["the budget cap is 40k euros"]
