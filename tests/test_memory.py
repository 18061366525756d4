"""The Memory facade on real engines: SQLite files, PostgreSQL (pgserver), Redis, MiniLM.

Plumbing tests use the hashing embedder (fast, deterministic); tests about meaning use
the packaged MiniLM and are marked slow.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.conftest import _server_url
from embedders import HashEmbedder, SlowEmbedder, minilm, wait_until
from tiermem.config.model import TiermemConfig
from tiermem.errors import (
    ClosedError,
    ConfigError,
    ContentTooLargeError,
    DimensionMismatchError,
    InputError,
    InvalidRoleError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
    StoreUnavailableError,
    TiermemError,
)
from tiermem.memory import Memory
from tiermem.memory.retrieval import PlannerInputs
from tiermem.messages import Message
from tiermem.stores.ops import AddOp, DeleteUserOp
from tiermem.stores.sqlite import SQLiteStore
from tiermem.stores.transcript import AppendOp
from tiermem.stores.validate import MAX_MESSAGE_CHARS
from tiermem.types.context import SECTIONS, Context
from tiermem.types.transcript import WorkStats

SMALL_BUFFER = {"memory": {"buffer": {"size": 8, "summary_batch": 4}}}
NO_FLOOR = {"memory": {**SMALL_BUFFER["memory"], "planner": {"floor": {"enabled": False}}}}
FLOOR = {"memory": {**SMALL_BUFFER["memory"], "planner": {"floor": {"enabled": True}}}}
THREAD_PREFIXES = (
    "tiermem-archiver",
    "tiermem-worker",
    "tiermem-working",
    "tiermem-access",
    "tiermem-search",
)


def make_memory(path: Path, config: Any = None, **parts: Any) -> Memory:
    parts.setdefault("embedder", HashEmbedder(32))
    path.mkdir(parents=True, exist_ok=True)
    return Memory(str(path / "memory.db"), config=config or SMALL_BUFFER, **parts)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    m = make_memory(tmp_path)
    yield m
    m.close()


def user() -> str:
    return f"user-{uuid.uuid4().hex[:10]}"


def pg_url() -> str:
    """The PostgreSQL of tests/conformance (one pgserver per test process)."""
    return os.environ.get("TIERMEM_TEST_PG_URL") or _server_url()


def contents(records: Iterable[Any]) -> set[str]:
    return {r.content for r in records}


def shown_once(ctx: Context, fact: str) -> bool:
    """The fact reaches the context exactly once: in the synopsis or as a retrieved item."""
    return ctx.text().count(fact) == 1


def retrieved(ctx: Context) -> list[str]:
    return [i.content for i in ctx.items if i.section == "retrieved"]


# -- adding ------------------------------------------------------------------------


def test_default_memory_is_embedded(tmp_path: Path) -> None:
    m = Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32))
    try:
        assert m.retention == "persistent"
        assert isinstance(m.store, SQLiteStore) and m.store.path == str(tmp_path / "m.db")
        assert m.llm is None  # offline: extractive summaries, offline synopses
        assert m.working is not None and m.synopses is not None
        assert m.config.memory.buffer.size == 50
    finally:
        m.close()


def test_a_path_in_a_missing_folder_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    folder = tmp_path / "no" / "such" / "folder"
    with pytest.raises(InputError, match="does not exist") as caught:
        Memory(str(folder / "x.db"), embedder=HashEmbedder(32))
    assert caught.value.field == "path" and "create the folder" in caught.value.hint
    assert not (tmp_path / "no").exists()
    with pytest.raises(InputError, match="is a folder"):
        Memory(str(tmp_path), embedder=HashEmbedder(32))


def test_the_default_path_is_created_in_an_empty_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with Memory(embedder=HashEmbedder(32)) as m:
        m.add("user", "hello", "u")
    assert (tmp_path / "data" / "tiermem" / "memory.db").is_file()


def test_wrong_types_are_named_as_wrong_types(memory: Memory) -> None:
    with pytest.raises(InvalidTypeError, match="user_id: must be a str, got int"):
        memory.add("user", "hi", 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="content: must be text"):
        memory.add("user", None, user())  # type: ignore[arg-type]
    with pytest.raises(MissingUserError):
        memory.add("user", "hi", "  ")
    with pytest.raises(InvalidRoleError, match=r"messages\[1\]\.role"):
        memory.add_messages([{"role": "user", "content": "a"}, {"role": "x", "content": "b"}], "u")


def test_a_closed_memory_raises_a_tiermem_error(tmp_path: Path) -> None:
    m = make_memory(tmp_path)
    m.close()
    with pytest.raises(ClosedError, match="closed") as caught:
        m.add("user", "late", "u")
    assert isinstance(caught.value, TiermemError) and isinstance(caught.value, RuntimeError)


def test_session_summary_is_the_running_summary_of_the_transcript(tmp_path: Path) -> None:
    config = {"memory": {"buffer": {"size": 4, "summary_batch": 2}}}
    with Memory(str(tmp_path / "m.db"), config=config, embedder=HashEmbedder(32)) as m:
        u = user()
        assert m.session_summary(u, "s") is None
        for i in range(8):
            m.add("user", f"Line number {i} mentions the lighthouse keeper", u, "s")
        assert m.flush(30)
        summary = m.session_summary(u, "s")
        assert summary is not None and "lighthouse" in summary
        assert m.get_context("lighthouse", u, "s").text().count(summary) == 1


def test_one_recent_window_per_user_and_session(memory: Memory) -> None:
    alice, bob = user(), user()
    memory.add("user", "alice in s1", alice, "s1")
    memory.add("user", "alice in s2", alice, "s2")
    memory.add("user", "alice without session", alice)
    memory.add("user", "bob in s1", bob, "s1")
    for (owner, session), text in [
        ((alice, "s1"), "alice in s1"),
        ((alice, "s2"), "alice in s2"),
        ((alice, None), "alice without session"),
        ((bob, "s1"), "bob in s1"),
    ]:
        recent = memory.recent(owner, session)
        assert [m.text for m in recent] == [text]
        assert recent[0].metadata["user_id"] == owner
    assert len(memory.buffers) == 0  # the store holds the windows, not this process
    assert {s.session_id for s in memory.sessions(alice)} == {"s1", "s2", None}
    ctx = memory.get_context("", bob, "s1")
    assert [m["content"] for m in ctx.messages] == ["bob in s1"]


def test_add_returns_the_message_with_owner_metadata(memory: Memory) -> None:
    u = user()
    when = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    msg = memory.add("assistant", "hello", u, "s", timestamp=when, metadata={"k": 1}, name="Bot")
    assert msg.role == "assistant" and msg.name == "Bot" and msg.timestamp == when
    assert msg.metadata == {"k": 1, "user_id": u, "session_id": "s"}


def test_add_messages_imports_history_with_timestamps_and_names(memory: Memory) -> None:
    u = user()
    day = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    history: list[Any] = [
        {"role": "user", "content": "I adopted a puppy", "name": "Caroline", "timestamp": day},
        {"role": "assistant", "content": "What is its name?", "name": "Melanie",
         "timestamp": (day + timedelta(minutes=1)).isoformat()},
        Message("user", "Its name is Rex", name="Caroline", timestamp=day + timedelta(minutes=2)),
    ]  # fmt: skip
    added = memory.add_messages(history, u, "s1")
    assert [m.text for m in added] == ["I adopted a puppy", "What is its name?", "Its name is Rex"]
    assert [m.timestamp for m in added] == [day + timedelta(minutes=i) for i in range(3)]
    assert memory.flush(10)
    rows = sorted(memory.store.index.list(u, memory_type="message"), key=lambda r: r.created_at)
    assert [r.content for r in rows] == [
        "Caroline: I adopted a puppy",
        "Melanie: What is its name?",
        "Caroline: Its name is Rex",
    ]
    assert [r.created_at for r in rows] == [m.timestamp for m in added]
    assert {r.session_id for r in rows} == {"s1"}
    # each message links to the one before it in its session (the planner's neighbours)
    assert rows[1].metadata["previous_id"] == added[0].message_id
    assert rows[2].metadata["previous_id"] == added[1].message_id


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"role": "robot", "content": "x"}, InvalidRoleError),
        ({"role": "user", "content": 42}, InvalidTypeError),
        ({"role": "user", "content": "x", "timestamp": "not a date"}, InputError),
        ({"role": "user", "content": "x", "metadata": ["not", "a", "dict"]}, InvalidTypeError),
        ({"content": "no role"}, InputError),
        ("just a string", InvalidTypeError),
        (None, InvalidTypeError),
    ],
)
def test_add_messages_validates_all_before_adding_any(
    memory: Memory, bad: Any, error: type[Exception]
) -> None:
    u = user()
    good = [{"role": "user", "content": f"fine {i}"} for i in range(3)]
    with pytest.raises(error):
        memory.add_messages([*good, bad], u, "s")
    with pytest.raises(error):  # the server's path validates alike
        memory.stage_messages([*good, bad], u, "s")
    assert memory.buffers.peek(u, "s") is None or len(memory.buffers.peek(u, "s")) == 0  # type: ignore[arg-type]
    assert memory.flush(5)
    assert memory.store.index.count(u) == 0


def test_staged_messages_are_written_together_only_when_committed(
    memory: Memory, tmp_path: Path
) -> None:
    u = user()
    first, op1 = memory.stage_messages([{"role": "user", "content": "one"}], u, "a")
    second, op2 = memory.stage_messages([{"role": "user", "content": "two"}], u, "b")
    assert memory.sessions(u) == []
    memory.commit_staged([op1, op2])
    assert [m.message_id for m in memory.history(u, "a")] == [first[0].message_id]
    assert [m.message_id for m in memory.history(u, "b")] == [second[0].message_id]
    _, op3 = memory.stage_messages([{"role": "user", "content": "three"}], u, "a")
    asyncio.run(memory.acommit_staged([op3]))
    assert [m.text for m in memory.history(u, "a")] == ["one", "three"]
    queued = make_memory(tmp_path / "queued", {"memory": {"durability": "memory"}})
    assert not queued.commits_messages
    with pytest.raises(ConfigError):
        queued.stage_messages([{"role": "user", "content": "one"}], u, "a")
    queued.close()


def test_add_messages_rejects_a_non_iterable(memory: Memory) -> None:
    with pytest.raises(InvalidTypeError, match="messages"):
        memory.add_messages(None, user())  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="messages"):
        memory.add_messages(42, user())  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="wrap a single message"):
        memory.add_messages({"role": "user", "content": "one"}, user())  # type: ignore[dict-item]
    with pytest.raises(InvalidTypeError, match="wrap a single message"):
        memory.add_messages(Message("user", "one"), user())  # type: ignore[arg-type]
    assert len(memory.buffers) == 0


def test_everything_is_stored_and_older_messages_are_summarized(memory: Memory) -> None:
    u = user()
    said = [f"message {i}: the weather in city{i} was sunny" for i in range(20)]
    for i, text in enumerate(said):
        memory.add("user" if i % 2 == 0 else "assistant", text, u, "s")
    assert memory.flush(10)
    assert [m.text for m in memory.recent(u, "s", 8)] == said[-8:]
    summary = memory.store.transcript.summary(u, "s")
    assert summary.text and "city0" in summary.text  # the oldest left the 8-message window
    assert summary.upto >= 4
    assert memory.store.index.count(u) == 20
    stored = contents(memory.store.index.list(u, limit=100))
    for i, text in enumerate(said):  # summarized ones too: nothing said is unreachable
        assert f"{'user' if i % 2 == 0 else 'assistant'}: {text}" in stored
    assert memory.work_stats(u) == WorkStats(pending=0, done=20, failed=0)
    ctx = memory.get_context("weather", u, "s", max_tokens=2000)
    assert any(i.section == "summary" for i in ctx.items)


def test_evicted_message_is_still_found_by_get_context(memory: Memory) -> None:
    u = user()
    memory.add("user", "my locker code is zebra-4471", u, "s")
    for i in range(15):
        memory.add("assistant", f"filler number {i} about gardening", u, "s")
    assert memory.flush(10)
    ctx = memory.get_context("what is my locker code zebra-4471?", u, "s", max_tokens=400)
    assert "user: my locker code is zebra-4471" in retrieved(ctx)


# -- remember, search, forget --------------------------------------------------------


def test_remember_search_forget(memory: Memory) -> None:
    alice, bob = user(), user()
    fact = memory.remember("Alice is allergic to peanuts", alice, "fact", 0.9)
    memory.remember("Alice prefers tea over coffee", alice, "preference", 0.6)
    memory.remember("Bob is allergic to peanuts", bob)
    hits = memory.search("peanuts allergy", alice, k=5)
    assert hits and all(h.record.user_id == alice for h in hits)
    assert hits[0].record.content == "Alice is allergic to peanuts"
    assert hits[0].record.importance == pytest.approx(0.9)
    prefs = memory.search("tea", alice, k=5, filters={"memory_type": "preference"})
    assert [h.record.content for h in prefs] == ["Alice prefers tea over coffee"]
    keyword = memory.search("peanuts", alice, mode="keyword")
    assert [h.record.content for h in keyword] == ["Alice is allergic to peanuts"]
    assert memory.forget(fact, bob) is False  # not bob's
    assert memory.store.index.count(alice) == 2
    assert memory.forget(fact, alice) is True
    assert memory.forget(fact, alice) is False
    assert contents(memory.store.index.list(alice)) == {"Alice prefers tea over coffee"}
    assert memory.store.index.count(bob) == 1


def test_forget_user_erases_every_tier_of_that_user_only(memory: Memory) -> None:
    alice, bob = user(), user()
    for who in (alice, bob):
        memory.remember(f"{who} likes chess", who)
        for i in range(12):
            memory.add("user", f"{who} says thing {i}", who, "s")
        memory.synopsis(who)
        assert memory.working is not None
        memory.working.add(f"{who} is in the working tier", user_id=who)
    assert memory.flush(10)
    assert memory.working is not None and memory.working.stats(alice).items == 1
    deleted = memory.forget_user(alice)
    assert deleted == 13
    assert memory.store.index.count(alice) == 0
    assert memory.recent(alice, "s") == [] and memory.sessions(alice) == []
    assert memory.store.transcript.summary(alice, "s").text is None
    assert memory.work_stats(alice) == WorkStats(0, 0, 0)
    assert memory.working.stats(alice).items == 0
    assert memory.synopses.cache.get_tiers(alice) == {}
    assert memory.synopsis(alice).render() == ""
    assert memory.get_context("chess", alice, "s").items == []
    assert memory.store.index.count(bob) == 13 and len(memory.recent(bob, "s")) == 12
    assert memory.working.stats(bob).items == 1
    assert "likes chess" in memory.synopsis(bob).render()
    assert memory.forget_user(alice) == 0


def test_forget_user_during_an_outage_erases_nothing(tmp_path: Path) -> None:
    store = FlakyStore(tmp_path / "f.db", dimension=32)
    m = make_memory(tmp_path, store=store)
    try:
        u, other = user(), user()
        m.add("user", "secret to erase", u, "s")
        m.add("user", "kept", other, "s")
        store.failing = True
        with pytest.raises(StoreUnavailableError, match="nothing was erased"):
            m.forget_user(u)
        store.failing = False
        assert [x.text for x in m.recent(u, "s")] == ["secret to erase"]  # wholly there
        assert m.forget_user(u) == 1
        assert m.flush(10)
        assert m.store.index.count(u) == 0 and m.recent(u, "s") == []  # wholly gone
        assert m.store.index.count(other) == 1
    finally:
        m.close()


# -- synopsis ----------------------------------------------------------------------


def test_synopsis_offline_from_facts_and_invalidated_by_a_new_fact(memory: Memory) -> None:
    u = user()
    assert memory.synopsis(u).render() == ""
    memory.remember("My name is Dana", u, "fact", 0.9)
    memory.remember("Dana prefers window seats", u, "preference", 0.7)
    first = memory.synopsis(u)
    assert first.source == "offline"
    assert "My name is Dana" in first.identity and "window seats" in first.identity
    assert memory.synopsis(u) == first  # cached
    memory.remember("Dana is vegetarian", u, "fact", 0.8)
    second = memory.synopsis(u)
    assert "vegetarian" in second.identity
    regenerated = memory.generate_synopsis(u)
    assert "vegetarian" in regenerated.identity
    ctx = memory.get_context("what should I cook?", u)
    synopsis_items = [i for i in ctx.items if i.section == "synopsis"]
    assert len(synopsis_items) == 1 and "vegetarian" in synopsis_items[0].content


def test_synopsis_disabled(tmp_path: Path) -> None:
    m = make_memory(tmp_path, {"memory": {"synopsis": {"enabled": False}}})
    try:
        u = user()
        m.remember("a fact", u)
        with pytest.raises(ConfigError, match="synopsis"):
            m.synopsis(u)
        assert all(i.section != "synopsis" for i in m.get_context("fact", u).items)
    finally:
        m.close()


# -- get_context -------------------------------------------------------------------


def test_get_context_sections_items_and_explain(tmp_path: Path) -> None:
    floored = make_memory(tmp_path / "floored", FLOOR)
    memory = make_memory(tmp_path, NO_FLOOR)  # every section, relevant or not
    u = user()
    for m in (floored, memory):
        m.remember("The user's dog is called Biscuit", u, "fact", 0.8)
        for i in range(12):
            m.add("user" if i % 2 == 0 else "assistant", f"chat line {i} on hiking trails", u)
        assert m.flush(10)
    unrelated = floored.get_context("what is my dog called?", u, max_tokens=600)
    assert not any("hiking" in i.content for i in unrelated.items if i.section == "retrieved")
    floored.close()
    ctx = memory.get_context("what is my dog called?", u, max_tokens=600)
    assert 0 < ctx.total_tokens <= 600 and ctx.max_tokens == 600 and ctx.tokens == ctx.total_tokens
    sections = [i.section for i in ctx.items]
    assert set(sections) == {"synopsis", "summary", "retrieved", "recent"}
    assert sections == sorted(sections, key=SECTIONS.index)  # the configured order
    for item in ctx.items:
        assert item.tokens > 0 and item.source and isinstance(item.score, float)
    assert {i.source for i in ctx.items if i.section == "recent"} == {"buffer"}
    assert shown_once(ctx, "The user's dog is called Biscuit")
    assert any(i.section == "synopsis" and "Biscuit" in i.content for i in ctx.items)
    older = next(i for i in ctx.items if i.section == "retrieved")
    assert older.source in ("store", "buffer") and "hiking" in older.content
    text = ctx.explain()
    lines = text.splitlines()
    assert lines[0] == f"context for 'what is my dog called?': {ctx.total_tokens}/600 tokens"
    assert lines[1].split() == ["section", "source", "score", "sim", "kw", "tokens", "content"]
    assert len(lines) == 2 + len(ctx.items)
    assert any(ln.startswith("retrieved") and "hiking" in ln for ln in lines)
    assert any(ln.startswith("synopsis") and "Biscuit" in ln for ln in lines)
    # the newest messages close the context, in order
    tail = [m["content"] for m in ctx.messages[-3:]]
    assert tail == [f"chat line {i} on hiking trails" for i in (9, 10, 11)]
    memory.close()


def test_to_anthropic(memory: Memory) -> None:
    u = user()
    memory.remember("The user lives in Lisbon", u)
    memory.add("user", "hi there", u)
    memory.add("assistant", "hello! how can I help?", u)
    memory.add("user", "where do I live?", u)
    ctx = memory.get_context("where do I live?", u, max_tokens=500)
    system, messages = ctx.to_anthropic()
    assert system is not None and "Lisbon" in system
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[-1]["content"] in (
        "where do I live?",
        [{"type": "text", "text": "where do I live?"}],
    )
    assert ctx.to_openai() == ctx.messages and ctx.to_openai() is not ctx.messages
    assert len(ctx) == len(ctx.messages)


def test_context_for_an_unknown_user_is_empty(memory: Memory) -> None:
    ctx = memory.get_context("anything at all?", user(), "nosuch", max_tokens=100)
    assert ctx.messages == [] and ctx.items == [] and ctx.total_tokens == 0


def test_recent_items_name_their_message(memory: Memory) -> None:
    """A recent item is a message: its ``message_id`` names it, as a retrieved message's
    does, so ``get_message`` (or ``forget_messages``) reaches it (it was None)."""
    u = user()
    added = memory.add("user", "I adopted a greyhound named Pixel.", u, "s1")
    ctx = memory.get_context("What is my dog called?", u, "s1", max_tokens=500)
    (item,) = [i for i in ctx.items if i.section == "recent"]
    assert item.message_id == added.message_id
    assert memory.get_message(item.message_id, user_id=u).content == added.content


def test_dedupe_same_fact_twice_and_recent_not_repeated(memory: Memory) -> None:
    u = user()
    first = memory.remember("The wifi password is kangaroo", u)
    assert memory.remember("The wifi password is kangaroo", u) == first
    memory.remember("the WIFI password is kangaroo!", u)  # same words: a near duplicate
    memory.add("user", "what is the wifi password kangaroo?", u, "s")
    assert memory.flush(10)
    ctx = memory.get_context("wifi password kangaroo", u, "s", max_tokens=1000)
    texts = retrieved(ctx)
    assert sum("password is kangaroo" in t.lower() for t in texts) == 1
    recent = [i.content for i in ctx.items if i.section == "recent"]
    assert recent == ["what is the wifi password kangaroo?"]
    assert not any("what is the wifi password" in t for t in texts)


def test_temporal_cue_prefers_memories_of_the_named_date(tmp_path: Path) -> None:
    memory = make_memory(tmp_path, NO_FLOOR)  # all four in every context: only the order counts
    u = user()
    friends = ["Anna", "Ben", "Cleo", "Dan"]
    for month, friend in zip((3, 5, 8, 10), friends, strict=True):
        when = datetime(2023, month, 8, 12, tzinfo=timezone.utc)
        text = f"We went to the lake for a picnic with {friend}"
        memory.add("user", text, u, f"trip-{friend}", timestamp=when)
        memory.end_session(u, f"trip-{friend}")  # nothing recent: only retrieved memories
    assert memory.flush(10)

    def best(question: str) -> str:
        ctx = memory.get_context(question, u, max_tokens=2000)
        items = [it for it in ctx.items if it.section == "retrieved"]
        assert len(items) == 4
        return max(items, key=lambda it: it.score).content.rsplit(" ", 1)[-1]

    assert best("Where did we go for a picnic?") == "Dan"  # no date: the newest
    assert best("Where did we go on 8 May 2023?") == "Ben"
    assert best("Where did we go on March 8?") == "Anna"  # no year: the memories' years
    assert best("Where did we go in August?") == "Cleo"
    assert best("Where did we go in October 2023?") == "Dan"
    assert best("Where did we go on 8 May 2019?") == "Dan"  # a date with no memories
    memory.close()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    budget=st.integers(50, 3000),
    history=st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "system"]),
            st.text(min_size=1, max_size=400).filter(lambda s: s.strip() and "\x00" not in s),
        ),
        max_size=30,
    ),
    facts=st.lists(
        st.text(min_size=1, max_size=300).filter(lambda s: s.strip() and "\x00" not in s),
        max_size=6,
    ),
    query=st.text(max_size=200),
)
def test_get_context_never_exceeds_the_budget(
    shared_memory: Memory, budget: int, history: list[tuple[str, str]], facts: list[str], query: str
) -> None:
    u = user()
    for fact in facts:
        shared_memory.remember(fact, u)
    for role, text in history:
        shared_memory.add(role, text, u, "s")
    ctx = shared_memory.get_context(query, u, "s", max_tokens=budget)
    counter = shared_memory.token_counter
    recount = sum(counter.count_message(Message.from_openai(m)) for m in ctx.messages)
    recount += 3 if ctx.messages else 0
    assert ctx.total_tokens == recount <= budget
    assert all(i.section in SECTIONS and i.tokens > 0 for i in ctx.items)
    assert sum(i.tokens for i in ctx.items if i.section == "recent") <= budget


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = make_memory(tmp_path_factory.mktemp("shared"))
    yield m
    m.close()


def test_huge_message_does_not_break_the_budget(memory: Memory) -> None:
    u = user()
    memory.add("user", "word " * 20_000, u)
    memory.add("user", "short question?", u)
    ctx = memory.get_context("word", u, max_tokens=200)
    assert ctx.total_tokens <= 200
    assert [i.content for i in ctx.items if i.section == "recent"] == ["short question?"]


# -- retention ---------------------------------------------------------------------


def test_session_retention_writes_nothing_to_the_store(tmp_path: Path) -> None:
    m = make_memory(
        tmp_path, {"memory": {"retention": "session", "buffer": {"size": 4, "summary_batch": 2}}}
    )
    try:
        u = user()
        m.add("user", "my bike is a red Bianchi", u, "s")
        for i in range(8):
            m.add("assistant", f"noted item {i}", u, "s")
        assert m.flush(10)
        assert m.store.index.count(u) == 0
        assert m.working is not None and m.working.stats(u).items == 9
        ctx = m.get_context("what bike is red Bianchi", u, "s", max_tokens=500)
        assert "user: my bike is a red Bianchi" in retrieved(ctx)
        found = {i.source for i in ctx.items if i.section == "retrieved" and "Bianchi" in i.content}
        assert found == {"working"}
        m.end_run()  # session retention: a run's end changes nothing
        assert len(m.buffers) == 1
    finally:
        m.close()


def test_single_run_retention_clears_at_end_run(tmp_path: Path) -> None:
    m = make_memory(tmp_path, {"memory": {"retention": "single_run"}})
    try:
        u = user()
        m.add("user", "temporary note about apples", u, "s")
        assert m.flush(10)
        assert m.working is not None and m.working.stats(u).items == 1
        m.end_run()
        assert len(m.buffers) == 0 and m.working.stats(u).items == 0
        assert m.get_context("apples", u, "s").items == []
        assert m.store.index.count(u) == 0
    finally:
        m.close()


def test_persistent_memory_survives_a_restart(tmp_path: Path) -> None:
    u = user()
    with make_memory(tmp_path) as first:
        first.add("user", "the spare key is under the blue pot", u, "s")
        for i in range(3):
            first.add("assistant", f"other chat {i}", u, "other")
        first.remember("User's name is Ola", u)
    with make_memory(tmp_path) as second:
        assert second.store.index.count(u) == 5
        assert [m.text for m in second.recent(u, "s")] == ["the spare key is under the blue pot"]
        ctx = second.get_context("where is the spare key blue pot?", u, "other", max_tokens=500)
        assert "user: the spare key is under the blue pot" in retrieved(ctx)


# -- async twins -------------------------------------------------------------------


async def test_async_twins(memory: Memory) -> None:
    u = user()
    msg = await memory.aadd("user", "async hello about sailing", u, "s")
    assert msg.text == "async hello about sailing"
    added = await memory.aadd_messages([{"role": "assistant", "content": "sailing is fun"}], u, "s")
    assert len(added) == 1
    fact = await memory.aremember("The user owns a sailboat named Wren", u)
    hits = await memory.asearch("sailboat Wren", u, k=3)
    assert hits[0].record.content == "The user owns a sailboat named Wren"
    ctx, other = await asyncio.gather(
        memory.aget_context("sailboat name?", u, "s", 300),
        memory.aget_context("sailboat name?", user(), "s", 300),
    )
    assert shown_once(ctx, "The user owns a sailboat named Wren")
    assert other.items == []
    assert await memory.aflush(10)
    assert await memory.aforget(fact, u) is True
    assert await memory.aforget_user(u) == 2
    assert memory.store.index.count(u) == 0
    await memory.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await memory.aadd("user", "late", u)


# -- lifecycle ---------------------------------------------------------------------


def _ours() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIXES)}


def test_close_leaves_no_threads_and_refuses_work(tmp_path: Path) -> None:
    before = _ours()
    m = make_memory(tmp_path)
    u = user()
    for i in range(20):
        m.add("user", f"line {i}", u)
    m.get_context("line", u)
    assert _ours() - before  # archiver and working-memory cleanup threads run
    m.close()
    assert wait_until(lambda: not (_ours() - before), 5)
    assert (
        SQLiteStore(tmp_path / "memory.db", dimension=32).index.count(u) == 20
    )  # close archived all
    m.close()  # idempotent
    for call in (
        lambda: m.add("user", "x", u),
        lambda: m.remember("x", u),
        lambda: m.search("x", u),
        lambda: m.get_context("x", u),
        lambda: m.forget_user(u),
        lambda: m.synopsis(u),
    ):
        with pytest.raises(RuntimeError, match="closed"):
            call()


def test_closes_the_redis_connection(tmp_path: Path) -> None:
    name = f"tiermem-test-{uuid.uuid4().hex[:8]}"
    url = f"redis://127.0.0.1:6379/0?client_name={name}"
    m = make_memory(
        tmp_path,
        {"memory": {"synopsis": {"backend": "redis", "redis_url": url, "namespace": name}}},
    )
    admin = redis.Redis(host="127.0.0.1", port=6379, decode_responses=True)

    def connected() -> int:
        return sum(c.get("name") == name for c in admin.client_list())

    m.synopsis(user())
    assert connected() >= 1
    m.close()
    assert wait_until(lambda: connected() == 0, 3)
    admin.close()


# -- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad_user", "error"),
    [
        (None, MissingUserError),
        ("", MissingUserError),
        ("   ", MissingUserError),
        (7, InvalidTypeError),  # given, but not a str: a wrong type, not a missing user
        (b"u", InvalidTypeError),
    ],
)
def test_missing_user_is_refused_everywhere(memory: Memory, bad_user: Any, error: type) -> None:
    for call in (
        lambda: memory.add("user", "x", bad_user),
        lambda: memory.add_messages([{"role": "user", "content": "x"}], bad_user),
        lambda: memory.remember("x", bad_user),
        lambda: memory.search("x", bad_user),
        lambda: memory.get_context("x", bad_user),
        lambda: memory.synopsis(bad_user),
        lambda: memory.forget(str(uuid.uuid4()), bad_user),
        lambda: memory.forget_user(bad_user),
    ):
        with pytest.raises(error, match=r"^user_id: "):
            call()
    assert len(memory.buffers) == 0


def test_bad_input_is_refused_and_changes_nothing(memory: Memory) -> None:
    u = user()
    with pytest.raises(InvalidRoleError):
        memory.add("robot", "x", u)
    with pytest.raises(InvalidTypeError):
        memory.add("user", 3.5, u)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        memory.add("user", "x", u, session_id=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        memory.add("user", "x", u, metadata="meta")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="NUL"):
        memory.add("user", "nul \x00 inside", u)
    with pytest.raises(InvalidTypeError):
        memory.get_context(42, u)  # type: ignore[arg-type]
    for budget in (0, -5, 10**18):
        with pytest.raises(InvalidSizeError):
            memory.get_context("x", u, max_tokens=budget)
    for wrong in (True, 2.5, "100"):  # as REST answers them: not an int
        with pytest.raises(InvalidTypeError):
            memory.get_context("x", u, max_tokens=wrong)  # type: ignore[arg-type]
    for memory_type in ("nonsense", None, 3):
        with pytest.raises(InputError):
            memory.remember("x", u, memory_type)  # type: ignore[arg-type]
    for importance in (-0.1, 1.5, "high"):
        with pytest.raises(InputError):
            memory.remember("x", u, "fact", importance)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        memory.remember("   ", u)
    with pytest.raises(InputError):
        memory.search("x", u, k=0)
    with pytest.raises(InputError):
        memory.forget("not-a-uuid", u)
    assert memory.flush(5)
    assert memory.store.index.count(u) == 0 and memory.recent(u, "s") == []


def test_bad_message_does_not_block_other_users_archive(memory: Memory) -> None:
    """A message the store would refuse is refused at add(), never queued forever."""
    u, other = user(), user()
    with pytest.raises(ContentTooLargeError, match="content"):
        memory.add("user", "x" * (MAX_MESSAGE_CHARS + 1), u)  # over memory.max_message_chars
    with pytest.raises(InputError, match=r"messages\[1\].*NUL"):
        memory.add_messages([Message("user", "fine"), Message("user", "a \x00 b")], u)
    assert memory.buffers.peek(u) is None or len(memory.buffers.peek(u) or []) == 0
    memory.add("user", "a normal message", other)
    assert memory.flush(5)
    assert memory.store.index.count(other) == 1 and memory.work_stats().failed == 0


# -- a store that fails --------------------------------------------------------------


class FlakyStore(SQLiteStore):
    """A real SQLite store whose writes fail while ``failing`` is set."""

    failing = False

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        ops = list(ops)
        if self.failing and any(isinstance(op, (AddOp, AppendOp, DeleteUserOp)) for op in ops):
            raise StoreUnavailableError("disk I/O error (on purpose)")
        return super().batch(ops)


def test_a_failing_store_refuses_the_add_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    store = FlakyStore(tmp_path / "flaky.db", dimension=32)
    m = make_memory(tmp_path, store=store)
    try:
        u = user()
        acknowledged = [m.add("user", f"precious message {i}", u, "s") for i in range(5)]
        store.failing = True
        with pytest.raises(StoreUnavailableError, match="on purpose"):
            m.add("user", "never acknowledged", u, "s")
        with pytest.raises(StoreUnavailableError):
            m.add_messages([{"role": "user", "content": f"batch {i}"} for i in range(3)], u, "s")
        ctx = m.get_context("precious", u, "s", max_tokens=300)  # reads still work
        assert [i.section for i in ctx.items].count("recent") == 5
        store.failing = False
        assert m.flush(10)
        assert [x.message_id for x in m.recent(u, "s")] == [a.message_id for a in acknowledged]
        assert contents(m.store.index.list(u)) == {f"user: precious message {i}" for i in range(5)}
    finally:
        m.close()


def test_read_only_database_refuses_writes_then_takes_them(tmp_path: Path) -> None:
    path = tmp_path / "ro" / "memory.db"
    path.parent.mkdir()
    SQLiteStore(path, dimension=32).close()  # create the schema
    store = SQLiteStore(path, dimension=32)
    m = Memory(str(path), config=SMALL_BUFFER, embedder=HashEmbedder(32), store=store)
    try:
        # file modes do not stop root, so make the connection itself read-only
        store._conn.execute("PRAGMA query_only=ON")  # the engine refuses every write
        u = user()
        with pytest.raises(StoreUnavailableError):
            m.add("user", "refused while read-only", u)
        store._conn.execute("PRAGMA query_only=OFF")
        m.add("user", "written now", u)
        assert m.flush(10)
        assert contents(m.store.index.list(u)) == {"user: written now"}
    finally:
        m.close()


# -- configuration -----------------------------------------------------------------


def test_from_config_dict_yaml_text_and_path(tmp_path: Path) -> None:
    db = tmp_path / "cfg.db"
    yaml_text = (
        f"memory:\n  buffer:\n    size: 5\n    summary_batch: 2\n  persistent:\n    path: {db}\n"
    )
    path = tmp_path / "tiermem.yaml"
    path.write_text(yaml_text)
    data = {"memory": {"buffer": {"size": 5, "summary_batch": 2}, "persistent": {"path": str(db)}}}
    u = user()
    for source in (data, yaml_text, str(path), path):
        with Memory.from_config(source, embedder=HashEmbedder(32)) as m:
            assert m.config.memory.buffer.size == 5
            assert isinstance(m.store, SQLiteStore) and m.store.path == str(db)
            m.add("user", f"via {type(source).__name__}", u)
    with Memory.from_config(data, embedder=HashEmbedder(32)) as m:
        assert m.store.index.count(u) == 3  # dict, str (text and path: same message), PosixPath
    with pytest.raises(ConfigError, match=r"memory\.buffer\.size"):
        Memory.from_config({"memory": {"buffer": {"size": 0}}})
    with pytest.raises(ConfigError, match="retention"):
        Memory.from_config({"memory": {"retention": "forever"}})
    assert isinstance(
        Memory(config=TiermemConfig.load(data), embedder=HashEmbedder(32)).config, TiermemConfig
    )


def test_from_config_postgresql(tmp_path: Path) -> None:
    from tiermem.stores.postgres import PostgresStore

    url = pg_url()
    config = {
        "memory": {
            "persistent": {"provider": "postgresql", "connection_string": "${TIERMEM_PG}"},
            "buffer": {"size": 4, "summary_batch": 2},
        }
    }
    os.environ["TIERMEM_PG"] = url
    try:
        m = Memory.from_config(config, embedder=HashEmbedder(24))
    finally:
        del os.environ["TIERMEM_PG"]
    try:
        assert isinstance(m.store, PostgresStore) and m.store.table == "memories_24"
        u = user()
        for i in range(6):
            m.add("user", f"postgres line {i} about kayaks", u, "s")
        m.remember("The user paddles a green kayak", u, "fact", 0.9)
        assert m.flush(10)
        assert m.store.index.count(u) == 7
        ctx = m.get_context("green kayak", u, "s", max_tokens=500)
        assert shown_once(ctx, "The user paddles a green kayak")
        assert "green kayak" in m.synopsis(u).identity
        assert m.forget_user(u) == 7 and m.store.index.count(u) == 0
    finally:
        m.close()


def test_redis_synopsis_backend(tmp_path: Path) -> None:
    namespace = f"tiermem-test-{uuid.uuid4().hex[:8]}"
    config = {"memory": {"synopsis": {"backend": "redis", "redis_url": "redis://127.0.0.1:6379/0",
                                      "namespace": namespace, "context_ttl": 60}}}  # fmt: skip
    admin = redis.Redis(host="127.0.0.1", port=6379, decode_responses=True)
    m = make_memory(tmp_path, config)
    try:
        u = user()
        m.remember("The user's name is Ines", u, "fact", 0.9)
        assert "Ines" in m.synopsis(u).identity
        identity, context = f"{namespace}:identity:{u}", f"{namespace}:context:{u}"
        assert admin.exists(identity) and admin.exists(context)
        assert 0 < admin.pttl(context) <= 60_000
        assert "Ines" in admin.get(identity)  # type: ignore[operator]
        m.remember("Ines prefers aisle seats", u, "preference")
        assert not admin.exists(identity) and admin.exists(context)  # only identity went stale
        assert "aisle seats" in m.synopsis(u).identity
        m.forget_user(u)
        assert not admin.exists(identity) and not admin.exists(context)
    finally:
        m.close()
        for key in admin.scan_iter(f"{namespace}:*"):
            admin.delete(key)
        admin.close()


# -- meaning (real model) ----------------------------------------------------------


@pytest.mark.slow
def test_remembered_fact_is_retrieved_for_a_related_question(tmp_path: Path) -> None:
    m = make_memory(tmp_path, embedder=minilm())
    try:
        u = user()
        facts = [
            "I am allergic to peanuts",
            "My sister lives in Toronto",
            "I drive a 2015 Honda Civic",
            "My favourite band is Radiohead",
            "I work as a nurse on night shifts",
            "I have two cats named Miso and Tofu",
        ]
        for fact in facts:
            m.remember(fact, u)
        for i in range(10):
            m.add(
                "user" if i % 2 == 0 else "assistant", f"Let's plan the garden, step {i}.", u, "s"
            )
        assert m.flush(30)
        ctx = m.get_context("Which foods should the cook avoid in my meal?", u, "s", max_tokens=300)
        ranked = sorted((i for i in ctx.items if i.section == "retrieved"), key=lambda i: -i.score)
        assert ranked[0].content == "I am allergic to peanuts"
        pets = m.get_context("What are my pets called?", u, "s", max_tokens=300)
        assert "I have two cats named Miso and Tofu" in retrieved(pets)
        hits = m.search("what car do I have", u, k=1, mode="vector")
        assert hits[0].record.content == "I drive a 2015 Honda Civic"
    finally:
        m.close()


@pytest.mark.slow
def test_default_memory_with_minilm_end_to_end(tmp_path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with Memory(str(tmp_path / "default.db")) as m:  # the real default embedder
        u = user()
        assert m.embedder.dimension == 384
        m.add("user", "I just moved to Porto and love the river views", u, "s")
        m.add("assistant", "Porto is lovely!", u, "s")
        m.remember("The user speaks Portuguese and English", u, "fact", 0.8)
        assert m.flush(30)
        ctx = m.get_context("Which languages do I know?", u, "s", max_tokens=300)
        assert shown_once(ctx, "The user speaks Portuguese and English")
        assert m.store.index.count(u) == 3


def test_a_given_store_is_shared_and_left_open(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "shared.db", embedder=HashEmbedder(32))
    first, second = make_memory(tmp_path, store=store), make_memory(tmp_path, store=store)
    u = user()
    first.add("user", "said to the first", u)
    first.close()
    second.remember("known to the second", u)
    assert second.store.index.count(u) == 2
    second.close()
    assert store.index.count(u) == 2  # still open: the caller owns it
    store.close()


def test_a_given_store_without_embedder_uses_the_memory_embedder(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "bare.db", dimension=32)  # no embedder of its own
    with make_memory(tmp_path, store=store) as m:
        u = user()
        m.remember("The user collects vintage stamps", u)
        m.add("user", "I found a rare stamp today", u)
        assert m.flush(10)
        for mode in ("hybrid", "vector", "keyword"):
            hits = m.search("vintage stamps", u, k=5, mode=mode)
            assert hits[0].record.content == "The user collects vintage stamps", mode
        with pytest.raises(InvalidTypeError, match="query"):
            m.search(None, u)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="content"):
            m.remember("", u)
        assert shown_once(m.get_context("stamps", u), "The user collects vintage stamps")
    store.close()


def test_a_store_of_another_dimension_is_refused_before_anything_is_added(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "narrow.db", dimension=8)
    m = make_memory(tmp_path, store=store)  # a 32-dimensional embedder
    u = user()
    with pytest.raises(DimensionMismatchError, match="8"):
        m.add("user", "never added", u)
    assert store.index.count(u) == 0 and store.transcript.recent(u, None, 10) == []
    with pytest.raises(DimensionMismatchError):
        m.remember("a fact", u)
    m.close()
    store.close()


def test_add_never_waits_on_the_embedder(tmp_path: Path) -> None:
    slow = SlowEmbedder(delay=60.0, dimension=32)  # answers only when released
    m = make_memory(tmp_path, embedder=slow)
    try:
        u = user()
        for i in range(30):  # the worker is stuck in the embedder meanwhile
            m.add("user", f"quick {i}", u, "s")
        assert slow.calls == []  # every add returned before any embedding finished
        assert len(m.recent(u, "s", 50)) == 30
        assert len(m.store.transcript.unindexed(u)) == 30 and m.store.index.count(u) == 0
        assert m.work_stats(u).pending == 30
    finally:
        slow.release.set()
        m.close()


def test_concurrent_writers_lose_nothing(memory: Memory) -> None:
    users = [user() for _ in range(3)]

    def write(who: str, session: str) -> None:
        for i in range(25):
            memory.add("user", f"{who} {session} line {i}", who, session)
            if i % 10 == 0:
                memory.get_context("line", who, session, max_tokens=200)

    threads = [
        threading.Thread(target=write, args=(who, f"s{j}")) for who in users for j in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert memory.flush(20)
    for who in users:
        assert memory.store.index.count(who) == 50
        assert all(c.startswith(f"user: {who} ") for c in contents(memory.store.index.list(who)))


@pytest.mark.parametrize("enabled", [True, False])
def test_buffer_vector_search_follows_the_config(tmp_path: Path, enabled: bool) -> None:
    config = {"memory": {"retention": "session", "buffer": {"vector_search": enabled}}}
    with make_memory(tmp_path / "m.db", config) as memory:
        memory.archiver.flush_interval = 60  # the message stays queued: only the buffer has it
        memory.add("user", "the lighthouse keeper paints seashells", "u", "s")
        context = memory.get_context("lighthouse seashells", "u", "s", max_tokens=500)
        sources = {item.source for item in context.items}
        assert "buffer" in sources  # the message is in the recent section either way
        assert bool(memory.buffers.peek("u", "s")._vectors) is enabled


def test_an_added_message_is_found_by_keyword_before_it_has_a_vector(tmp_path: Path) -> None:
    config = {"memory": {"buffer": {"size": 50}, "planner": {"recent_messages": 0}}}
    slow = SlowEmbedder(delay=30.0, dimension=32)
    with make_memory(tmp_path, config, embedder=HashEmbedder(32)) as memory:
        memory.worker.embedder = slow  # the worker cannot embed yet
        memory.add("user", "the lighthouse keeper paints seashells", "u", "s")
        memory.add("user", "we talked about the weather", "u", "s")
        queued = memory.get_context("lighthouse seashells", "u", "s", max_tokens=500)
        lines = [i for i in queued.items if "lighthouse" in i.content]
        assert [(i.section, i.source) for i in lines] == [("retrieved", "store")]
        slow.release.set()
        memory.worker.embedder = memory.embedder
        assert memory.flush(10)
        hits = memory.search("lighthouse seashells", "u", mode="vector", k=1)
        assert hits[0].record.content == "user: the lighthouse keeper paints seashells"


def test_without_the_store_every_buffered_message_is_offered(tmp_path: Path) -> None:
    config = {
        "memory": {
            "retention": "session",
            "buffer": {"size": 50},
            "planner": {"recent_messages": 0},
        }
    }
    with make_memory(tmp_path, config) as memory:
        memory.add("user", "the lighthouse keeper paints seashells", "u", "s")
        assert memory.flush(10)  # written to the working memory, which may forget it
        context = memory.get_context("lighthouse seashells", "u", "s", max_tokens=500)
        (line,) = [i for i in context.items if i.source == "buffer"]
        assert "lighthouse" in line.content and line.timestamp is not None


def test_memory_durability_close_with_a_dead_store_hands_back_the_queue(tmp_path: Path) -> None:
    store = FlakyStore(tmp_path / "dead.db", dimension=32)
    m = make_memory(tmp_path, {"memory": {"durability": "memory"}}, store=store)
    m.archiver.retry_backoff = 0.05
    store.failing = True
    u = user()
    sent = [m.add("user", f"kept {i}", u, "s") for i in range(3)]
    assert m.pending == 3  # what a crash now would lose
    assert wait_until(lambda: m.archiver.failures >= 1)
    with pytest.raises(StoreUnavailableError, match="3 messages could not be archived"):
        m.close(timeout=0.5)
    assert [msg.message_id for msg in m.unarchived] == [s.message_id for s in sent]
    store.failing = False
    store.close()


def test_forget_user_refuses_while_a_queued_batch_cannot_be_written(tmp_path: Path) -> None:
    import tiermem.memory.retention as memory_module

    store = FlakyStore(tmp_path / "erase.db", dimension=32)
    m = make_memory(tmp_path, {"memory": {"durability": "memory"}}, store=store)
    try:
        m.archiver.retry_backoff = 0.05
        u = user()
        m.remember("kept fact", u)
        store.failing = True
        m.add("user", "queued for the erased user", u, "s")
        m.add("user", "queued for someone else", "someone-else", "s")
        assert wait_until(lambda: m.archiver.failures >= 1)
        memory_module.ERASE_TIMEOUT = 0.3
        with pytest.raises(StoreUnavailableError, match="nothing was erased"):
            m.forget_user(u)  # the store takes no writes: erasure must not pretend
        assert m.store.index.count(u) == 1
        store.failing = False
        memory_module.ERASE_TIMEOUT = 30.0
        assert m.forget_user(u) == 1
        assert m.flush(10) and m.store.index.count(u) == 0  # its queued message was discarded
        assert m.store.index.count("someone-else") == 1
    finally:
        memory_module.ERASE_TIMEOUT = 30.0
        m.close()


def test_end_session_keeps_the_final_summary(tmp_path: Path) -> None:
    with make_memory(tmp_path / "m.db", SMALL_BUFFER) as m:
        u = user()
        for i in range(12):
            m.add("user", f"On day {i} I planted {i} tomato seedlings in the garden.", u, "s")
        summary = m.end_session(u, "s")
        assert summary and "tomato" in summary
        assert m.store.transcript.summary(u, "s").text == summary
        kept = m.store.index.list(u, memory_type="summary")
        assert [r.content for r in kept] == [summary] and kept[0].session_id == "s"
        assert m.end_session(u, "s") is None  # nothing new to fold in
        assert m.end_session(u, "no-such-session") is None


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


class _Boom(HashEmbedder):
    def _embed_batch(self, texts: list[str]) -> Any:
        raise RuntimeError("custom embedder failed")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda m: m.add("user", {"a": b"bytes"}, "u"), InvalidTypeError),
        (lambda m: m.add("user", _deep(5000), "u"), InvalidTypeError),
        (lambda m: m.add("user", "x", "u", bogus=1), InvalidTypeError),
        (lambda m: m.search("x", "u", filters={"bogus": 1}), InvalidTypeError),
        (lambda m: m.search("x", "u", filters="memory_type"), InvalidTypeError),
        (lambda m: m.search("x", "u", filters={"memory_type": 5}), InvalidTypeError),
        (lambda m: m.search("\ud800", "u"), InputError),
        (lambda m: m.get_context("\ud800", "u"), InputError),
        (lambda m: m.remember("lone \ud800", "u"), InputError),
        (lambda m: m.flush("x"), InvalidTypeError),
        (lambda m: m.store.index.count(" "), MissingUserError),
        (lambda m: Message.from_json('{"role": "user", "content": ' + "[" * 5000 + "]" * 5000 + "}"),
         InputError),
    ],
)  # fmt: skip
def test_bad_input_gets_a_typed_error(memory: Memory, call: Any, error: type) -> None:
    with pytest.raises(error):
        call(memory)
    assert memory.store.index.count("u") == 0


def test_construction_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InvalidTypeError, match="store"):
        Memory(store="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="path"):
        Memory(path=123)  # type: ignore[arg-type]
    assert not (Path.cwd() / "123").exists()
    with pytest.raises(InvalidTypeError, match="timeout"):
        make_memory(tmp_path).close("x")  # type: ignore[arg-type]


def test_a_custom_embedders_failure_is_a_provider_error(tmp_path: Path) -> None:
    from tiermem.errors import ProviderError

    with make_memory(tmp_path, embedder=_Boom(32)) as m:
        for call in (
            lambda: m.get_context("hello", "u"),
            lambda: m.search("hello", "u"),
            lambda: m.remember("hello", "u"),
        ):
            with pytest.raises(ProviderError, match="custom embedder failed"):
                call()


def test_an_add_only_process_leaves_the_work_to_another(tmp_path: Path) -> None:
    add_only = {"memory": {"worker": {"background": False}}}
    front = make_memory(tmp_path, add_only)
    try:
        u = user()
        for i in range(5):
            front.add("user", f"note {i} about the harbour", u, "s")
        assert not front.worker._runner.running and front.work_stats(u).pending == 5
        ctx = front.get_context("harbour", u, "other", max_tokens=500)
        assert len([i for i in ctx.items if "harbour" in i.content]) == 5  # found by keyword
        with make_memory(tmp_path) as worker_process:  # another process's worker indexes them
            worker_process.worker.wake()
            assert wait_until(lambda: front.work_stats(u).pending == 0, 20)
        assert front.store.index.count(u) == 5
    finally:
        front.close()


def test_follow_up_searches_what_the_best_hits_name(tmp_path: Path) -> None:
    from tiermem.memory.retrieval import leads_of

    assert leads_of("Where is Pixel?", ["Ada: Yes! My dog Pixel met Cleo in Porto in 2023."]) == (
        "cleo porto 2023"
    )  # not the speaker, the sentence's first word, the query's own words or filler
    u = user()
    lines = [
        ("Ada", "I adopted a greyhound, her name is Pixel."),
        ("Bo", "Did you see the river walk yesterday?"),
        ("Bo", "Pixel won the agility cup last weekend!"),
    ]

    def context(follow_up: int) -> str:
        planner = {"k": 1, "follow_up": follow_up, "floor": {"enabled": False}}
        memory = make_memory(
            tmp_path / str(follow_up), {"memory": {**SMALL_BUFFER["memory"], "planner": planner}}
        )
        for i, (name, text) in enumerate(lines):
            memory.add("user", text, u, f"s{i}", name=name)
            memory.end_session(u, f"s{i}")
        assert memory.flush(10)
        try:
            found = memory._retriever.gather("Which greyhound did Ada adopt?", u, None, inputs)
            return " ".join(c.content for c in found.candidates if c.keyword is not None)
        finally:
            memory.close()

    assert "agility" not in context(0)  # found by keyword: the adoption line alone
    assert "agility" in context(1)  # its name, Pixel, found the other line


def test_search_thread_work_runs_on_the_calling_thread_when_no_thread_started_it(
    memory: Memory,
) -> None:
    """The query's embedding and the keyword search go to search threads while the reads
    run; what no thread has started by the time it is wanted (a busy machine, or every
    search thread taken) is run by the caller instead of waited for: the same hits."""
    u = user()
    memory.add("user", "The harbour ferry leaves at noon.", u, "s1")
    assert memory.flush(10)
    before = memory._retriever.gather("harbour ferry", u, None, inputs)
    release, held = threading.Event(), []
    searches = memory._tiers.search_pool()
    for _ in range(searches._max_workers):  # every search thread waits
        held.append(searches.submit(release.wait, 5))
    try:
        during = memory._retriever.gather("harbour ferry", u, None, inputs)
        assert not any(h.done() for h in held)  # found while no search thread was free
    finally:
        release.set()
    keyword = [(c.content, c.keyword) for c in before.candidates if c.keyword is not None]
    assert keyword and keyword == [
        (c.content, c.keyword) for c in during.candidates if c.keyword is not None
    ]
    assert [c.similarity for c in before.candidates] == [c.similarity for c in during.candidates]


def inputs(found: PlannerInputs) -> PlannerInputs:
    """What :meth:`~tiermem.memory.retrieval.Retriever.gather` finishes with: its inputs."""
    return found


def test_a_changed_memory_is_planned_from_its_new_record(memory: Memory) -> None:
    """The retriever keeps each stored record's candidate fields while the store hands
    out the same record object (SQLite's row cache): a changed memory is a new record,
    planned with its new line and importance, not the fields kept of the old one."""
    u = user()
    memory_id = memory.remember("Ana keeps bees on the roof", user_id=u, importance=0.2)
    memory.flush()
    for _ in range(2):  # the second time from the row cache and the kept fields
        context = memory.get_context("Where are the bees kept?", user_id=u, max_tokens=500)
        assert "Ana keeps bees on the roof" in context.text()
    memory.update_memory(memory_id, u, content="Ana keeps bees in the garden", importance=0.9)
    memory.flush()
    context = memory.get_context("Where are the bees kept?", user_id=u, max_tokens=500)
    assert "Ana keeps bees in the garden" in context.text()
    assert "on the roof" not in context.text()


def test_a_stored_memory_becomes_a_candidate_field_by_field() -> None:
    """Candidates are made positionally (the hot path): every field lands where its name
    says, however the dataclass's fields are ordered."""
    import numpy as np

    from tiermem.memory.retrieval import _from_record
    from tiermem.text import folded
    from tiermem.types.records import MemoryRecord

    when = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    record = MemoryRecord(
        id=uuid.uuid4(),
        user_id="u",
        content="Ana Adopted a greyhound",
        memory_type="fact",
        session_id="session-7",
        importance=0.83,
        metadata={
            "message_id": "m-2",
            "previous_id": "m-1",
            "evidence": ["ana: I adopted a greyhound"],
            "sources": ["m-0"],
            "valid_until": "2024-06-01T00:00:00+00:00",
        },
        created_at=when,
        embedding=np.arange(4, dtype=np.float32),
    )
    candidate = _from_record(record, 0.61, keyword=2.5)
    assert candidate.content.startswith("Ana Adopted a greyhound (until ")
    assert (candidate.source, candidate.similarity, candidate.keyword) == ("store", 0.61, 2.5)
    assert (candidate.timestamp, candidate.importance) == (when, 0.83)
    assert candidate.key == folded(record.content)
    assert (candidate.session_id, candidate.message_id, candidate.previous_id) == (
        "session-7",
        "m-2",
        "m-1",
    )
    assert candidate.memory_id == record.id and candidate.vector is record.embedding
    assert (candidate.keywords, candidate.relevance, candidate.score) == (0.0, 0.0, 0.0)
    assert candidate.current is False
    assert (candidate.sources, candidate.source_ids) == (("ana: I adopted a greyhound",), ("m-0",))
