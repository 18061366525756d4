"""One behaviour suite for every face of the contract (:class:`tiermem.api.MemoryAPI`):
the embedded :class:`Memory` on SQLite and on PostgreSQL, :class:`MemoryClient` and
:class:`AsyncMemoryClient` against a real server (uvicorn on loopback) serving each engine.
The same arguments give the same return types, and the same bad input the same typed
error, on every face."""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.api import AsyncMemoryAPI, MemoryAPI, operations
from tiermem.client import AsyncMemoryClient, MemoryClient
from tiermem.errors import (
    ContentTooLargeError,
    InputError,
    InvalidRoleError,
    InvalidSizeError,
    InvalidTypeError,
    MessageNotFoundError,
    MissingUserError,
    NotFoundError,
)
from tiermem.memory import Memory
from tiermem.messages import Message
from tiermem.server import create_app
from tiermem.stores.validate import MAX_MESSAGE_CHARS
from tiermem.types.context import SECTIONS, Context
from tiermem.types.records import MemoryRecord, SearchResult
from tiermem.types.synopsis import Synopsis
from tiermem.types.transcript import SessionInfo, WorkStats

CONFIG = {"memory": {"buffer": {"size": 8, "summary_batch": 4}, "facts": {"enabled": True}}}
DIM = 32
FACES = ["embedded", "client", "async-client"]
ENGINES = ["sqlite", "postgres"]


async def _collect(stream: Any) -> list[Any]:
    return [item async for item in stream]


class _Blocking:
    """The async client driven through the sync names, so one test body runs on it:
    ``face.search(...)`` awaits ``client.asearch(...)`` on a loop of its own."""

    def __init__(self, client: AsyncMemoryClient) -> None:
        self._client = client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, f"a{name}")

        def run(*args: Any, **kwargs: Any) -> Any:
            called = method(*args, **kwargs)
            if inspect.isasyncgen(called):  # a stream (aexport): read whole
                called = _collect(called)
            return asyncio.run_coroutine_threadsafe(called, self._loop).result()

        return run

    def close(self) -> None:
        self.__getattr__("close")()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@contextmanager
def embedded(engine: str, path: Path, pg_url: str | None = None) -> Iterator[Memory]:
    """A Memory on ``engine`` (each PostgreSQL test has its own store over the shared server)."""
    embedder = HashEmbedder(DIM)
    if engine == "sqlite":
        with Memory(str(path / "memory.db"), config=CONFIG, embedder=embedder) as memory:
            yield memory
        return
    from tiermem.stores.postgres import PostgresStore

    with (
        closing(PostgresStore(pg_url or "", dimension=DIM, embedder=embedder)) as store,
        Memory(config=CONFIG, store=store, embedder=embedder) as memory,
    ):
        yield memory


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Callable[[str], str]]:
    """One served Memory per engine, started on first use; its URL by engine."""
    urls: dict[str, str] = {}
    with ExitStack() as stack:

        def url(engine: str) -> str:
            if engine not in urls:
                pg = request.getfixturevalue("pg_url") if engine == "postgres" else None
                path = tmp_path_factory.mktemp(f"served-{engine}")
                memory = stack.enter_context(embedded(engine, path, pg))
                app = create_app(memory, keys=str(path / "keys.db"))
                urls[engine] = stack.enter_context(live_server(app))
            return urls[engine]

        yield url


@pytest.fixture(params=[(f, e) for f in FACES for e in ENGINES], ids=lambda p: f"{p[0]}-{p[1]}")
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    face, engine = request.param
    if face == "embedded":
        pg = request.getfixturevalue("pg_url") if engine == "postgres" else None
        with embedded(engine, tmp_path, pg) as m:
            yield m
        return
    url = request.getfixturevalue("servers")(engine)
    m: Any = MemoryClient(url) if face == "client" else _Blocking(AsyncMemoryClient(url))
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


def test_search_scores_are_relevance_and_min_score_leaves_out_the_rest(
    memory: Any, user: str
) -> None:
    """Issue 35, item 4, on every face: a score is a relevance in [0, 1], the same for a
    memory at k=1 and at k=50, with what it was made of in the evidence; ``min_score``
    leaves out the hits that score less, in every mode, and is refused outside [0, 1]."""
    for text in ("prefers green tea over coffee", "green tea with jasmine", "parks on level 3"):
        memory.remember(text, user)
    hits = memory.search("green tea", user, k=50)
    scores = [h.score for h in hits]
    assert len(hits) == 3 and scores == sorted(scores, reverse=True)
    assert all(0.0 < s < 1.0 for s in scores)
    for hit in hits:
        e = hit.evidence
        assert e is not None and e.similarity is not None and e.fused_rank is not None
        assert e.keywords == (0.0 if "level" in hit.record.content else 1.0)
    (first,) = memory.search("green tea", user, k=1)
    assert first.score == {h.record.id: h.score for h in hits}[first.record.id]
    least = scores[1]
    for mode in ("hybrid", "vector", "keyword"):
        found = memory.search("green tea", user, k=50, mode=mode)
        kept = memory.search("green tea", user, k=50, mode=mode, min_score=least)
        assert kept and [h.record.id for h in kept] == [
            h.record.id for h in found if h.score >= least
        ]
    assert memory.search("green tea", user, min_score=1.0) == []
    for bad, error in ((1.5, InvalidSizeError), (-1, InvalidSizeError), ("1", InvalidTypeError)):
        with pytest.raises(error) as raised:
            memory.search("green tea", user, min_score=bad)
        assert raised.value.field == "min_score"


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
        (lambda m, u: m.add_messages({"role": "user"}, u), InvalidTypeError, "messages"),
        (lambda m, u: m.remember("x", u, importance=2.0), InvalidSizeError, "importance"),
        (lambda m, u: m.remember("x", u, memory_type="gossip"), InputError, "memory_type"),
        (lambda m, u: m.remember("   ", u), InputError, "content"),
        (lambda m, u: m.search("tea", u, k=0), InvalidSizeError, "k"),
        (lambda m, u: m.get_context("tea", u, max_tokens=0), InvalidSizeError, "max_tokens"),
        (lambda m, u: m.forget("not-a-uuid", u), InputError, "memory_id"),
    ],
)
def test_typed_errors(memory: Any, user: str, call: Any, error: type, field: str) -> None:
    with pytest.raises(error) as raised:
        call(memory, user)
    assert raised.value.field.endswith(field)


NAN = float("nan")


@pytest.mark.parametrize(
    ("call", "error", "field"),
    [
        # issue 35, item 3: a budget past any model's window was a 500 over REST
        (lambda m, u: m.get_context("tea", u, max_tokens=10**18), InvalidSizeError, "max_tokens"),
        (lambda m, u: m.get_context("tea", u, max_tokens=10**400), InvalidSizeError, "max_tokens"),
        (lambda m, u: m.get_context("tea", u, max_tokens=True), InvalidTypeError, "max_tokens"),
        (lambda m, u: m.get_context("tea", u, max_tokens=2.0), InvalidTypeError, "max_tokens"),
        # the user is an argument, never a filter (it was a bare TypeError); nor are the
        # search's own arguments, which a filter silently overrode
        (
            lambda m, u: m.search("tea", u, filters={"user_id": "other"}),
            InvalidTypeError,
            "filters.user_id",
        ),
        (
            lambda m, u: m.search("tea", u, filters={"query": "x"}),
            InvalidTypeError,
            "filters.query",
        ),
        (lambda m, u: m.search("tea", u, filters={"limit": 50}), InvalidTypeError, "filters.limit"),
        (
            lambda m, u: m.search("tea", u, filters={"mode": "vector"}),
            InvalidTypeError,
            "filters.mode",
        ),
        (lambda m, u: m.search("tea", u, filters={"bogus": 1}), InvalidTypeError, "filters.bogus"),
        (lambda m, u: m.search("tea", u, k=True), InvalidTypeError, "k"),
        (lambda m, u: m.search("tea", u, k=10**18), InvalidSizeError, "k"),
        (lambda m, u: m.search("tea", u, k=10**400), InvalidSizeError, "k"),
        (
            lambda m, u: m.search("tea", u, filters={"metadata": {"n": 2**63}}),
            InvalidSizeError,
            "metadata.n",
        ),
        (
            lambda m, u: m.search("tea", u, filters={"metadata": {"n": NAN}}),
            InputError,
            "metadata.n",
        ),
        (lambda m, u: m.list_memories(u, metadata={"n": 10**30}), InvalidSizeError, "metadata.n"),
        (lambda m, u: m.list_memories(u, metadata={"n": NAN}), InputError, "metadata.n"),
        (lambda m, u: m.list_memories(u, limit=10**18), InvalidSizeError, "limit"),
        (lambda m, u: m.list_memories(u, limit=True), InvalidTypeError, "limit"),
        (lambda m, u: m.list_memories(u, offset=10**18), InvalidSizeError, "offset"),
        (lambda m, u: m.list_memories(u, offset=True), InvalidTypeError, "offset"),
        (lambda m, u: m.list_memories(u, offset=-1), InvalidSizeError, "offset"),
        (lambda m, u: m.recent(u, "s", limit=10**18), InvalidSizeError, "limit"),
        (lambda m, u: m.recent(u, "s", limit=True), InvalidTypeError, "limit"),
        (lambda m, u: m.failed(u, limit=0), InvalidSizeError, "limit"),
        (lambda m, u: m.failed(u, limit=10**18), InvalidSizeError, "limit"),
        (lambda m, u: m.facts(u, limit=10**18), InvalidSizeError, "limit"),
        (lambda m, u: m.facts(u, current=1), InvalidTypeError, "current"),
        (lambda m, u: m.facts(u, current="no"), InvalidTypeError, "current"),
        (lambda m, u: m.remember("x", u, importance=True), InvalidTypeError, "importance"),
        (lambda m, u: m.remember("x", u, importance=10**30), InvalidSizeError, "importance"),
        (lambda m, u: m.remember("x", u, importance=NAN), InvalidSizeError, "importance"),
        (lambda m, u: m.flush(-1), InvalidSizeError, "timeout"),
        (lambda m, u: m.flush(NAN), InvalidSizeError, "timeout"),
        (lambda m, u: m.flush(True), InvalidTypeError, "timeout"),
    ],
)
def test_bad_numbers_and_filters_are_typed(
    memory: Any, user: str, call: Any, error: type, field: str
) -> None:
    """Issue 35, item 3: every integer parameter (huge, a bool, out of range) and every
    filter key is the same typed error naming the same field on every face."""
    with pytest.raises(error) as raised:
        call(memory, user)
    assert type(raised.value) is error
    assert raised.value.field == field or raised.value.field.endswith(f".{field}")


MCP_FACES = ["mcp-embedded", "mcp-client", "mcp-http"]
"""The MCP tools over the embedded Memory (``tiermem mcp``), over a MemoryClient
(``tiermem mcp --url``) and at ``/mcp`` of a server."""
TOOL_ERROR = re.compile(r"^(\w+): ([\w.\[\]]+): ")


@contextmanager
def mcp_face(face: str, tmp_path: Path, url: str, user: str) -> Iterator[Any]:
    """An MCP client session of ``user`` on ``face``."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from tiermem.server.mcp import build_server

    with ExitStack() as stack:
        if face == "mcp-http":
            import httpx2

            headers = {"X-Tiermem-User": user}
            http = httpx2.AsyncClient(headers=headers)
            yield Client(streamable_http_client(url + "/mcp", http_client=http))
            return
        if face == "mcp-client":
            memory: Any = stack.enter_context(MemoryClient(url))
        else:
            memory = stack.enter_context(embedded("sqlite", tmp_path))
        yield Client(build_server(lambda request: (memory, user)))


@pytest.mark.parametrize("face", MCP_FACES)
@pytest.mark.parametrize(
    ("tool", "arguments", "call", "error", "field"),
    [
        (
            "search_memory",
            {"query": "tea", "k": 10**18},
            lambda m, u: m.search("tea", u, k=10**18),
            InvalidSizeError,
            "k",
        ),
        (
            "search_memory",
            {"query": "tea", "k": True},
            lambda m, u: m.search("tea", u, k=True),
            InvalidTypeError,
            "k",
        ),
        (
            "search_memory",
            {"query": "tea", "k": 2.0},
            lambda m, u: m.search("tea", u, k=2.0),
            InvalidTypeError,
            "k",
        ),
        (
            "get_context",
            {"query": "tea", "max_tokens": 10**18},
            lambda m, u: m.get_context("tea", u, max_tokens=10**18),
            InvalidSizeError,
            "max_tokens",
        ),
        (
            "get_context",
            {"query": "tea", "max_tokens": True},
            lambda m, u: m.get_context("tea", u, max_tokens=True),
            InvalidTypeError,
            "max_tokens",
        ),
        (
            "list_memories",
            {"limit": True},
            lambda m, u: m.list_memories(u, limit=True),
            InvalidTypeError,
            "limit",
        ),
        (
            "list_memories",
            {"limit": 0},
            lambda m, u: m.list_memories(u, limit=0),
            InvalidSizeError,
            "limit",
        ),
        (
            "list_facts",
            {"limit": False},
            lambda m, u: m.facts(u, limit=False),
            InvalidTypeError,
            "limit",
        ),
        (
            "add_memory",
            {"content": "x", "importance": True},
            lambda m, u: m.remember("x", u, importance=True),
            InvalidTypeError,
            "importance",
        ),
        (
            "add_memory",
            {"content": "x", "importance": 10**30},
            lambda m, u: m.remember("x", u, importance=10**30),
            InvalidSizeError,
            "importance",
        ),
    ],
)
async def test_mcp_tools_refuse_what_the_library_refuses(
    face: str,
    tool: str,
    arguments: dict[str, Any],
    call: Any,
    error: type,
    field: str,
    tmp_path: Path,
    servers: Callable[[str], str],
) -> None:
    """Issue 35, item 3, on the MCP face: a huge number, a bool or a float where a tool
    takes an int is the error class the library raises for the same call, naming the same
    field (MCP's own bounds are tighter: k and limit are for a model's context)."""
    user = f"mcp-{uuid.uuid4().hex[:8]}"
    (tmp_path / "library").mkdir()
    with embedded("sqlite", tmp_path / "library") as library, pytest.raises(error) as raised:
        call(library, user)
    assert raised.value.field == field
    with mcp_face(face, tmp_path, servers("sqlite"), user) as client:
        async with client:
            refused = await client.call_tool(tool, arguments)
    assert refused.is_error
    text = refused.content[0].text
    found = TOOL_ERROR.match(text)
    assert found and (found.group(1), found.group(2)) == (error.__name__, field), text


def _structured(size: int) -> str:
    """Text of exactly ``size`` characters as an agent meets it pasted: headings,
    paragraphs, a code block, log lines with tabs, quotes, non-ASCII and an emoji."""
    parts, i = [], 0
    while sum(map(len, parts)) < size:
        parts.append(
            f"## Part {i}\n\nThe deploy of service é-{i} failed after the migration; "
            "the trace and the handler follow.\n\n"
            f'```python\ndef handler(event):\n    return {{"status": {i}, "ok": False}}\n```\n\n'
            f"2024-05-01T12:00:{i % 60:02d}Z\tERROR\tworker-{i}: «timeout» after 30 s 🚀\r\n\n"
        )
        i += 1
    return "".join(parts)[:size]


def test_a_long_message_is_kept_whole_and_one_past_the_ceiling_is_refused(
    memory: Any, user: str
) -> None:
    """Issue 34: a 1,000,000-character message is read back byte for byte from the
    transcript; one past ``memory.max_message_chars`` (a body over 8 MB: the server
    takes it) is the typed error naming the setting, and nothing is written."""
    text = _structured(1_000_000)
    added = memory.add("user", text, user, "paste", name="Ann", metadata={"source": "log"})
    (stored,) = memory.history(user, "paste")
    assert stored.content == text and stored.text.encode() == text.encode()
    assert (stored.name, stored.metadata["source"]) == ("Ann", "log")
    whole = memory.get_message(added.message_id, user_id=user)
    assert whole.content == text and whole.to_dict() == stored.to_dict()
    too_long = "é" * (MAX_MESSAGE_CHARS + 1)
    for call in (
        lambda: memory.add("user", too_long, user, "paste"),
        lambda: memory.add_messages(
            [{"role": "user", "content": "fits"}, {"role": "user", "content": too_long}],
            user,
            "paste",
        ),
    ):
        with pytest.raises(ContentTooLargeError) as raised:
            call()
        error = raised.value
        assert error.field in ("message.content", "messages[1].content")
        assert f"{MAX_MESSAGE_CHARS + 1:,}" in error.problem
        assert f"{MAX_MESSAGE_CHARS:,}" in error.problem
        assert "memory.max_message_chars" in error.hint
    assert [m.message_id for m in memory.history(user, "paste")] == [added.message_id]
    assert [s.messages for s in memory.sessions(user)] == [1]


def test_get_message_gives_the_users_message_whole(memory: Any, user: str) -> None:
    said = memory.add("user", "the first line", user, "s", name="Ann", metadata={"mood": "ok"})
    odd = Message("assistant", "an id a path could break", message_id="a/../b é?#.")
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    tool = Message("assistant", None, tool_calls=[call])
    memory.add_messages([odd, tool], user, "s")
    history = memory.history(user, "s")
    for message in history:
        found = memory.get_message(message.message_id, user_id=user)
        assert isinstance(found, Message) and found.to_dict() == message.to_dict()
    assert memory.get_message(said.message_id, user_id=user).metadata["mood"] == "ok"
    assert memory.get_message(tool.message_id, user_id=user).tool_calls == [call]
    other = f"other-{uuid.uuid4().hex[:8]}"
    for message_id, owner in (("no-such-id", user), (said.message_id, other), ("..", user)):
        with pytest.raises(MessageNotFoundError) as missing:
            memory.get_message(message_id, user_id=owner)
        assert isinstance(missing.value, NotFoundError)
        assert "first line" not in str(missing.value)
    for bad, error in ((42, InvalidTypeError), (None, InvalidTypeError), ("", InputError)):
        with pytest.raises(error) as raised:
            memory.get_message(bad, user_id=user)
        assert raised.value.field == "message_id"
    with pytest.raises(MissingUserError):
        memory.get_message(said.message_id, user_id="")


def _is_async(method: Any) -> bool:
    return inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method)


def test_every_operation_of_the_contract_is_on_every_face() -> None:
    """The figure of issue 19: MemoryAPI's operations on all three implementations."""
    for face in (Memory, MemoryClient):
        missing = [
            name for name in operations(MemoryAPI) if not callable(getattr(face, name, None))
        ]
        assert not missing, f"{face.__name__} lacks {missing}"
    for face in (Memory, AsyncMemoryClient):
        names = operations(AsyncMemoryAPI)
        missing = [name for name in names if not _is_async(getattr(face, name, None))]
        assert not missing, f"{face.__name__} lacks {missing}"
    assert {f"a{name}" for name in operations(MemoryAPI)} == set(operations(AsyncMemoryAPI))


def test_users_and_the_running_summary_of_a_session(memory: Any, user: str) -> None:
    """Issue 35, item 5: ``users`` and ``session_summary`` on every face (the server's
    /v1/users and /v1/users/{u}/sessions/summary)."""
    assert memory.session_summary(user, "s") is None
    for i in range(12):
        memory.add("user", f"Line {i} mentions the lighthouse keeper", user, "s")
    assert memory.flush(30)
    summary = memory.session_summary(user, "s")
    assert isinstance(summary, str) and "lighthouse" in summary
    assert memory.session_summary(user, "another") is None
    everyone: list[str] = []
    while page := memory.users(limit=500, after=everyone[-1] if everyone else ""):
        assert all(isinstance(u, str) for u in page)
        everyone += page
    assert user in everyone and len(everyone) == len(set(everyone))
    at = everyone.index(user)
    assert memory.users(limit=1, after=everyone[at - 1] if at else "") == [user]


def test_health_and_the_queue(memory: Any) -> None:
    """Issue 35, item 5: ``health`` and ``queue_status`` on every face (over HTTP: the
    server's /readyz, its key table included, and the answering process's queue)."""
    health = memory.health()
    assert {"store", "model", "cache"} <= set(health) and set(health.values()) == {"ok"}
    assert memory.queue_status() == {"pending": 0, "failures": 0, "last_error": None}


def test_a_client_health_says_the_server_is_unreachable() -> None:
    """``health`` never raises, as Memory's: a server that cannot be reached is a part
    that fails."""
    from liveserver import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with MemoryClient(url, timeout=2) as client:
        assert client.health()["server"].startswith("StoreUnavailableError: ")
    blocking = _Blocking(AsyncMemoryClient(url, timeout=2))
    assert blocking.health()["server"].startswith("StoreUnavailableError: ")
    blocking.close()


PROCESS_ONLY = (
    "from_config",
    "stage_messages",
    "commit_staged",
    "end_run",
    "size",
    "replica_status",
)
"""Memory's public methods outside the contract: docs/api.md says why each belongs to
the embedded process alone."""


def test_every_public_method_of_memory_is_in_the_contract_or_said_to_be_the_process() -> None:
    """Issue 35, item 5: a public method the clients lack is one docs/api.md explains."""
    contract = set(operations(MemoryAPI)) | set(operations(AsyncMemoryAPI))
    methods = {
        name
        for name in dir(Memory)
        if not name.startswith("_")
        and callable(getattr(Memory, name))
        and not isinstance(inspect.getattr_static(Memory, name), property)
    }
    twins = {f"a{name}" for name in PROCESS_ONLY}
    assert methods - contract - twins == set(PROCESS_ONLY)
    page = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    section = page.split("## Only in the embedded process", 1)[1].split("\n## ", 1)[0]
    for name in PROCESS_ONLY:
        assert f"{name}(" in section, name


def test_recent_and_sessions_end_and_forget(memory: Any, user: str) -> None:
    for i in range(5):
        memory.add("user" if i % 2 == 0 else "assistant", f"line {i} about sailing", user, "s")
    memory.add("user", "another session", user, "t")
    assert [m.content for m in memory.recent(user, "s", limit=2)] == [
        "line 3 about sailing",
        "line 4 about sailing",
    ]
    summary = memory.end_session(user, "s")
    assert isinstance(summary, str) and "sailing" in summary
    assert memory.forget_session(user, "t") == 1
    assert memory.history(user, "t") == []
    assert [s.session_id for s in memory.sessions(user)] == ["s"]


def test_forget_messages(memory: Any, user: str) -> None:
    kept = memory.add("user", "I keep bees on the roof", user, "s")
    gone = memory.add("user", "my PIN is 4321", user, "s")
    assert memory.forget_messages(user, [gone.message_id, "no-such-id"]) == 1
    assert [m.message_id for m in memory.history(user, "s")] == [kept.message_id]
    memory.flush(10)
    assert "4321" not in memory.get_context("what is my PIN", user, "s").text()


def test_facts_extraction_and_history(memory: Any, user: str) -> None:
    memory.add("user", "My name is Ines and I live in Porto.", user, "s")
    ids = memory.extract_facts(user, "s")
    assert ids and all(isinstance(i, str) for i in ids)
    facts = memory.facts(user)
    assert facts and all(isinstance(f, MemoryRecord) for f in facts)
    assert {str(f.id) for f in facts} >= set(ids)
    versions = memory.fact_history(ids[0], user)
    assert [str(v.id) for v in versions][-1] == ids[0]
    with pytest.raises(NotFoundError):
        memory.fact_history(str(uuid.uuid4()), user)


def test_generate_synopsis_and_stats(memory: Any, user: str) -> None:
    memory.remember("collects vinyl records", user, "preference")
    synopsis = memory.generate_synopsis(user)
    assert isinstance(synopsis, Synopsis) and "vinyl" in synopsis.render()
    stats = memory.stats(user)
    assert stats.count == 1 and stats.by_type == {"preference": 1}


def test_agent_id_is_kept_and_filtered(memory: Any, user: str) -> None:
    memory.add("user", "planner agent line", user, "s", agent_id="planner")
    memory.add_messages(
        [{"role": "user", "content": "coder agent line"}], user, "s", agent_id="coder"
    )
    memory.remember("a planner fact", user, agent_id="planner")
    memory.flush(10)
    planner = memory.list_memories(user, agent_id="planner")
    assert sorted(r.content for r in planner) == ["a planner fact", "user: planner agent line"]
    assert [r.agent_id for r in memory.list_memories(user, agent_id="coder")] == ["coder"]


def test_list_memories_pages_and_filters(memory: Any, user: str) -> None:
    ids = [memory.remember(f"note {i}", user, "context") for i in range(5)]
    memory.remember("a preference", user, "preference")
    first = memory.list_memories(user, limit=2, memory_type="context")
    rest = memory.list_memories(user, limit=10, offset=2, memory_type="context")
    assert {str(r.id) for r in first + rest} == set(ids)
    both = memory.list_memories(user, memory_type=["context", "preference"])
    assert len(both) == 6


@pytest.mark.parametrize("odd", [".", "..", "a/../b", "%2E", "?x=1#y"])
def test_every_id_a_face_accepts_it_can_address(memory: Any, odd: str) -> None:
    user = f"{odd}" if odd in (".", "..") else f"{odd}-{uuid.uuid4().hex[:6]}"
    memory.forget_user(user)  # a user left by an earlier run of a shared server
    memory_id = memory.remember("reachable", user)
    assert memory.get_memory(memory_id, user).user_id == user
    assert memory.synopsis(user).user_id == user
    assert memory.stats(user).count == 1
    assert memory.forget_user(user) == 1
    assert memory.stats(user).count == 0


def test_users_are_isolated_on_every_operation(memory: Any, user: str) -> None:
    other = f"other-{uuid.uuid4().hex[:8]}"
    secret = memory.remember("the vault code is 9911", user)
    message = memory.add("user", "my vault is in Bern", user, "s")
    memory.flush(10)
    assert memory.get_memory(secret, other) is None
    with pytest.raises(NotFoundError):
        memory.update_memory(secret, other, content="hijacked")
    assert memory.forget(secret, other) is False
    assert memory.forget_messages(other, [message.message_id]) == 0
    assert memory.search("vault code", other) == []
    assert "9911" not in memory.get_context("vault code", other).text()
    assert memory.list_memories(other) == [] and memory.history(other, "s") == []
    assert memory.get_memory(secret, user).content == "the vault code is 9911"


@pytest.mark.parametrize(
    ("call", "error", "field"),
    [
        (lambda m, u: m.update_memory(str(uuid.uuid4()), u), InputError, "changes"),
        (lambda m, u: m.update_memory(str(uuid.uuid4()), u, importance=0.5), NotFoundError, None),
        (lambda m, u: m.update_memory("nope", u, importance=0.5), InputError, "memory_id"),
        (
            lambda m, u: m.update_memory(str(uuid.uuid4()), u, importance=7.0),
            InvalidSizeError,
            "importance",
        ),
        (lambda m, u: m.get_memory("nope", u), InputError, "memory_id"),
        (lambda m, u: m.list_memories(u, limit=0), InvalidSizeError, "limit"),
        (lambda m, u: m.list_memories(u, memory_type="gossip"), InputError, "memory_type"),
        (lambda m, u: m.recent("", None), MissingUserError, "user_id"),
        (lambda m, u: m.forget_messages(u, 42), InvalidTypeError, "message_ids"),
        (lambda m, u: m.fact_history("nope", u), InputError, "memory_id"),
        (lambda m, u: m.facts(u, limit=0), InvalidSizeError, "limit"),
        (lambda m, u: m.history(u, "x" * 300), InputError, "session_id"),
        (lambda m, u: m.session_summary("", "s"), MissingUserError, "user_id"),
        (lambda m, u: m.session_summary(u, "x" * 300), InputError, "session_id"),
        (lambda m, u: m.users(limit=0), InvalidSizeError, "limit"),
        (lambda m, u: m.users(limit=10**18), InvalidSizeError, "limit"),
        (lambda m, u: m.users(limit=True), InvalidTypeError, "limit"),
        (lambda m, u: m.users(after=5), InvalidTypeError, "after"),
    ],
)
def test_typed_errors_of_the_new_operations(
    memory: Any, user: str, call: Any, error: type, field: str | None
) -> None:
    with pytest.raises(error) as raised:
        call(memory, user)
    if field is not None:  # a list's index is the server's detail: memory_type.0
        assert (raised.value.field or "").rstrip(".0123456789").endswith(field)


def test_export_then_import_restores_the_user(memory: Any, user: str) -> None:
    memory.add("user", "I grow tomatoes on the balcony", user, "garden")
    memory.remember("grows tomatoes", user, "fact", 0.8, metadata={"source": "chat"})
    memory.flush(10)
    archive = list(memory.export(user))
    assert archive[0]["user_id"] == user and len(archive) >= 4
    twin = f"copy-{uuid.uuid4().hex[:8]}"
    added = memory.import_archive(archive, twin)
    assert added == {"messages": 1, "memories": 2}
    assert memory.import_archive(archive, twin) == {"messages": 0, "memories": 0}
    assert [m.content for m in memory.history(twin, "garden")] == ["I grow tomatoes on the balcony"]
    assert memory.stats(twin).count == memory.stats(user).count == 2
    with pytest.raises(InputError) as raised:
        memory.import_archive(archive[:-1], f"cut-{uuid.uuid4().hex[:8]}")
    assert raised.value.field.startswith("line")
