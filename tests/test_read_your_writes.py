"""Read your writes by meaning: a message is found by a paraphrase in the very next
context, from another process and through the server, before any worker embedded it
(the user's newest not-yet-indexed messages are embedded with the query, bounded; older
ones by keyword). And ``agent_id`` reaches the column from every face.

Real engines (SQLite files, PostgreSQL from pgserver), the packaged MiniLM, a real
uvicorn server, real subprocesses.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from conformance.conftest import _server_url
from embedders import HashEmbedder, minilm
from liveserver import live_server
from tiermem.client import AsyncMemoryClient, MemoryClient
from tiermem.errors import InputError, InvalidTypeError, ProviderError, TiermemError
from tiermem.memory import Memory
from tiermem.server import create_app

SRC = Path(__file__).resolve().parents[1] / "src"
PAIRS = [
    ("I adopted a greyhound named Pixel.", "What is my dog called?"),
    ("My sister Ines lives in Tartu.", "Which city is my sibling in?"),
    ("I work as a carpenter in Lyon.", "What is my occupation?"),
    ("I play the cello every weekend.", "Which musical instrument do I practise?"),
]
WRITER = """
import sys
from tiermem.memory import Memory
store, user = sys.argv[1], sys.argv[2]
persistent = (
    {"provider": "postgresql", "connection_string": store}
    if store.startswith("postgresql://") else {"path": store}
)
memory = Memory(config={"memory": {"persistent": persistent, "worker": {"background": False}}})
for i, fact in enumerate(sys.argv[3:]):
    memory.add("user", fact, user, f"s{i}")
print(memory.work_stats(user).pending, flush=True)
sys.stdin.read()  # alive while the test asks (its close indexes what is pending)
memory.close(timeout=0)
"""


def config(store: str, **planner: Any) -> dict[str, Any]:
    """A store whose worker never runs in the background (rows stay pending)."""
    persistent: dict[str, Any] = (
        {"provider": "postgresql", "connection_string": store}
        if store.startswith("postgresql://")
        else {"path": store}
    )
    memory = {"persistent": persistent, "worker": {"background": False}, "planner": planner}
    return {"memory": memory}


def user() -> str:
    return f"ryw-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "memory.db")
    return os.environ.get("TIERMEM_TEST_PG_URL") or _server_url()


class Counting:
    """The real embedder, recording the texts of each call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.asarray(self.inner.embed(texts))


# -- by meaning, at once -----------------------------------------------------------------


@pytest.mark.slow
def test_another_process_adds_and_this_one_finds_it_by_meaning(store: str) -> None:
    u = user()
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, store, u, *(fact for fact, _ in PAIRS)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    on = Memory(config=config(store), embedder=minilm())
    off = Memory(config=config(store, pending_vectors=0), embedder=minilm())
    try:
        assert writer.stdout is not None and writer.stdin is not None
        assert writer.stdout.readline().strip() == str(len(PAIRS))  # acknowledged, pending
        for fact, question in PAIRS:
            assert fact in on.get_context(question, u, "asking").text(), question
        # keyword search alone does not reach them: the paraphrase shares no word
        assert not any(fact in off.get_context(q, u, "asking").text() for fact, q in PAIRS)
        assert on.work_stats(u).pending == len(PAIRS)  # no worker ran meanwhile
    finally:
        on.close(timeout=0)
        off.close(timeout=0)
        if writer.stdin is not None:
            writer.stdin.close()
        assert writer.wait(120) == 0


@pytest.mark.slow
def test_pending_messages_embedded_per_call_are_bounded_keyword_search_reaches_beyond(
    tmp_path: Path,
) -> None:
    counting = Counting(minilm())
    memory = Memory(config=config(str(tmp_path / "m.db"), pending_vectors=4), embedder=counting)
    u = user()
    try:
        memory.add("user", "I adopted a greyhound named Pixel.", u, "s1")
        fillers = [f"Note {i}: the paella recipe needs more salt." for i in range(9)]
        for text in fillers:
            memory.add("user", text, u, "s1")
        counting.calls.clear()
        question = "What is my dog called?"
        context = memory.get_context(question, u, "s2")
        queried = [call for call in counting.calls if question in call]
        assert queried == [[question]]  # embedded from the start, beside the reads
        pending = [f"user: {t}" for t in reversed(fillers[-4:])]
        assert [call for call in counting.calls if call == pending] == [pending]  # the newest 4
        assert "greyhound" not in context.text()  # beyond the bound, and no shared word
        found = memory.get_context("greyhound?", u, "s2").text()
        assert "I adopted a greyhound named Pixel." in found  # keyword search beyond it
        assert memory.work_stats(u).pending == 10
    finally:
        memory.close(timeout=0)


class Refusing(HashEmbedder):
    """Refuses any text that says REFUSE (as a provider's content filter may)."""

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        if any("REFUSE" in t for t in texts):
            raise ProviderError("refused")
        return super()._embed_batch(texts)


def test_a_pending_message_the_embedder_refuses_leaves_the_rest_to_keywords(
    tmp_path: Path,
) -> None:
    memory = Memory(config=config(str(tmp_path / "m.db")), embedder=Refusing(32))
    u = user()
    try:
        memory.add("user", "the lighthouse keeper paints seashells", u, "s1")
        memory.add("user", "REFUSE this line", u, "s1")
        context = memory.get_context("lighthouse seashells", u, "s2")
        assert "the lighthouse keeper paints seashells" in context.text()
        with pytest.raises(ProviderError):  # the query itself: the embedder's error
            memory.get_context("REFUSE", u, "s2")
    finally:
        memory.close(timeout=0)


@pytest.mark.slow
def test_the_server_finds_a_posted_message_by_meaning_in_the_next_context(
    tmp_path: Path,
) -> None:
    memory = Memory(config=config(str(tmp_path / "m.db")), embedder=minilm())
    u = user()
    try:
        with live_server(create_app(memory)) as url, httpx.Client(base_url=url) as http:
            for i, (fact, question) in enumerate(PAIRS):
                body = {"user_id": u, "session_id": f"s{i}", "messages": []}
                body["messages"] = [{"role": "user", "content": fact}]
                assert http.post("/v1/messages", json=body).status_code == 201
                ask = {"user_id": u, "session_id": "asking", "query": question}
                answer = http.post("/v1/context", json=ask)
                assert answer.status_code == 200
                texts = [m["content"] for m in answer.json()["messages"]]
                assert any(fact in text for text in texts), question
        assert memory.work_stats(u).pending == len(PAIRS)
    finally:
        memory.close(timeout=0)


# -- agent_id ----------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Memory]]:
    memory = Memory(
        str(tmp_path / "m.db"),
        config={"memory": {"buffer": {"size": 8, "summary_batch": 4}}},
        embedder=HashEmbedder(32),
    )
    with live_server(create_app(memory)) as url:
        yield url, memory
    memory.close()


def test_agent_id_reaches_the_column_from_every_face(served: tuple[str, Memory]) -> None:
    url, memory = served
    u = user()
    memory.add("user", "from the library", u, "s", agent_id="library")
    with MemoryClient(url) as client:
        client.add("user", "from the client", u, "s", agent_id="client")
        client.add_messages([{"role": "user", "content": "from a batch"}], u, agent_id="batch")

    async def add_async() -> None:
        async with AsyncMemoryClient(url) as client:
            await client.aadd("user", "from the async client", u, "s", agent_id="async")
            batch = [{"role": "user", "content": "from an async batch"}]
            await client.aadd_messages(batch, u, agent_id="async-batch")

    asyncio.run(add_async())
    with httpx.Client(base_url=url) as http:
        body = {"user_id": u, "agent_id": "rest", "messages": [{"role": "user", "content": "rest"}]}
        assert http.post("/v1/messages", json=body).status_code == 201
        assert memory.flush(30)
        expected = {
            "library": "user: from the library",
            "client": "user: from the client",
            "batch": "user: from a batch",
            "async": "user: from the async client",
            "async-batch": "user: from an async batch",
            "rest": "user: rest",
        }
        for agent, line in expected.items():
            page = http.get("/v1/memories", params={"user_id": u, "agent_id": agent}).json()
            assert [(m["content"], m["agent_id"]) for m in page["memories"]] == [(line, agent)]
            assert "agent_id" not in page["memories"][0]["metadata"]


@pytest.mark.parametrize(
    ("agent_id", "error"), [("x" * 300, InputError), ("a\x00b", InputError), (5, InvalidTypeError)]
)
def test_a_bad_agent_id_is_the_same_typed_error_in_every_face(
    served: tuple[str, Memory], agent_id: Any, error: type[TiermemError]
) -> None:
    url, memory = served
    u = user()
    with pytest.raises(error) as library:
        memory.add("user", "never added", u, "s", agent_id=agent_id)
    faces: list[BaseException] = [library.value]
    with MemoryClient(url) as client:
        for add in (
            lambda: client.add("user", "never added", u, "s", agent_id=agent_id),
            lambda: client.add_messages(
                [{"role": "user", "content": "never added"}], u, agent_id=agent_id
            ),
        ):
            with pytest.raises(error) as raised:
                add()
            faces.append(raised.value)

    async def add_async() -> None:
        async with AsyncMemoryClient(url) as client:
            with pytest.raises(error) as raised:
                await client.aadd("user", "never added", u, "s", agent_id=agent_id)
            faces.append(raised.value)

    asyncio.run(add_async())
    with httpx.Client(base_url=url) as http:
        body = {"user_id": u, "agent_id": agent_id, "messages": [{"role": "user", "content": "x"}]}
        answer = http.post("/v1/messages", json=body)
        assert answer.status_code in (400, 422)
        assert answer.json()["error"] == error.__name__
        assert answer.json()["field"] == "agent_id"
    assert all(getattr(e, "field", None) == "agent_id" for e in faces)
    assert memory.history(u, "s") == [] and memory.work_stats(u).pending == 0
