"""Synopsis, SynopsisGenerator (offline and over HTTP against the fake server) and
SynopsisService; backend-specific cache behaviour (LRU bound, Redis outage, redaction).

The shared cache contract is in tests/conformance/test_synopsis_cache.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from fakeserver import FakeServer, Reply
from tiermem.config.model import TiermemConfig
from tiermem.errors import (
    CacheError,
    ConfigError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
)
from tiermem.llm.openai import OpenAIModel
from tiermem.synopsis import (
    InMemorySynopsisCache,
    RedisSynopsisCache,
    SynopsisGenerator,
    SynopsisService,
    cache_from_config,
    parse_sections,
    redact_url,
)
from tiermem.synopsis.generator import gist, near_duplicates
from tiermem.types.records import MemoryRecord
from tiermem.types.synopsis import Synopsis, SynopsisTier

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


def record(
    content: str,
    memory_type: str = "fact",
    importance: float = 0.5,
    days: float = 0,
    user_id: str = "alice",
) -> MemoryRecord:
    return MemoryRecord(
        id=uuid.uuid4(),
        user_id=user_id,
        content=content,
        memory_type=memory_type,  # type: ignore[arg-type]
        importance=importance,
        created_at=T0 + timedelta(days=days),
    )


MEMORIES = [
    record("Prefers answers in bullet points", "preference", 0.8, days=1),
    record("Works as a nurse in Lyon", "fact", 0.7, days=2),
    record("My name is Alice Martin", "fact", 0.3, days=0),
    record("Is vegetarian", "preference", 0.9, days=3),
    record("Wants to run a half marathon in October", "context", 0.5, days=10),
    record("Discussed training plans and knee pain", "summary", 0.5, days=11),
    record("what shoes should I buy for trail running?", "message", 0.5, days=12),
    record("ran `pip list`", "tool", 1.0, days=12),
    record("My name is Bob and I love golf", "fact", 1.0, days=5, user_id="bob"),
]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def llm_for(server: FakeServer, **kw: Any) -> OpenAIModel:
    opts: dict[str, Any] = {"base_url": server.openai_url, "api_key": "k", "max_retries": 0}
    opts.update(kw)
    return OpenAIModel("gpt-4o-mini", **opts)


# -- Synopsis ------------------------------------------------------------------------


def test_synopsis_dict_round_trip_and_render() -> None:
    s = Synopsis("alice", "Name: Alice", "Training for a marathon", T0, "llm")
    assert Synopsis.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    text = s.render()
    assert text.index("Name: Alice") < text.index("Training for a marathon")
    assert Synopsis("alice", "", "  ", T0).render() == ""


@pytest.mark.parametrize(
    "data",
    [
        "not a dict",
        {"user_id": "a", "identity": 3, "context": ""},
        {"user_id": "a", "identity": "", "context": "", "source": "gpt"},
        {"user_id": "a", "identity": "", "context": "", "generated_at": "yesterday"},
    ],
)
def test_synopsis_from_dict_rejects_bad_data(data: Any) -> None:
    with pytest.raises(InvalidTypeError):
        Synopsis.from_dict(data)


def test_from_tiers_takes_the_older_time_and_llm_only_if_both() -> None:
    later = T0 + timedelta(hours=2)
    s = Synopsis.from_tiers(
        "u",
        {"identity": SynopsisTier("i", T0, "llm"), "context": SynopsisTier("c", later, "offline")},
    )
    assert (s.generated_at, s.source) == (T0, "offline")


# -- offline generator ----------------------------------------------------------------


def test_offline_synopsis_content_and_order() -> None:
    s = SynopsisGenerator().generate("alice", MEMORIES)
    assert s.source == "offline"
    lines = s.identity.splitlines()
    # the name statement leads, then facts/preferences by importance score
    assert lines[0].startswith("Facts: My name is Alice Martin; Works as a nurse in Lyon")
    assert lines[1] == "Preferences: Is vegetarian; Prefers answers in bullet points."
    assert s.context.splitlines() == [
        "Goals: Wants to run a half marathon in October.",
        "Recent topics: Discussed training plans and knee pain.",
        "Recently said: what shoes should I buy for trail running?.",
    ]
    assert "Bob" not in s.render() and "golf" not in s.render()  # other users never leak in
    assert "pip list" not in s.render()  # tool output is neither identity nor context


def test_offline_is_deterministic_whatever_the_input_order() -> None:
    generator = SynopsisGenerator()
    expected = generator.generate("alice", MEMORIES)
    for seed in range(5):
        shuffled = MEMORIES[:]
        random.Random(seed).shuffle(shuffled)
        got = generator.generate("alice", shuffled)
        assert (got.identity, got.context) == (expected.identity, expected.context)


def test_offline_bounds_items_and_length() -> None:
    many = [record(f"Fact number {i:03d} " + "word " * 200, "fact", i / 100) for i in range(100)]
    many += [record(f"Said thing {i}", "message", days=i) for i in range(100)]
    s = SynopsisGenerator(max_items=5, max_chars=400).generate("alice", many)
    assert len(s.identity) <= 400 and len(s.context) <= 400
    assert 1 < s.identity.count("Fact number") <= 5  # long items are cut, not the whole tier
    assert "Fact number 099" in s.identity  # the most important first
    assert (
        s.context
        == "Recently said: " + "; ".join(f"Said thing {i}" for i in range(99, 94, -1)) + "."
    )


def test_offline_dedupes_same_text() -> None:
    memories = [record("Likes tea", "preference", 0.9), record("likes  TEA.", "preference", 0.9)]
    s = SynopsisGenerator().generate("alice", memories)
    assert s.identity.lower().count("likes tea") == 1


def test_offline_merges_near_duplicates_into_the_longer_wording() -> None:
    memories = [
        record("I prefer tea over coffee", "preference", 0.9, days=2),
        record("Ana prefers tea to coffee.", "preference", 0.5, days=1),
        record("Prefers tea over coffee", "preference", 0.4),
        record("Works as a nurse", "fact", 0.8),
        record("Works as a nurse in Lyon", "fact", 0.7),  # says more: kept apart
        record("Does not like green tea", "preference", 0.3),
        record("Likes green tea", "preference", 0.3),  # the opposite: kept apart
    ]
    s = SynopsisGenerator().generate("alice", memories)
    assert s.identity.splitlines() == [
        "Preferences: Ana prefers tea to coffee; Does not like green tea; Likes green tea.",
        "Facts: Works as a nurse; Works as a nurse in Lyon.",
    ]


def test_near_duplicates_need_the_same_content_words() -> None:
    same = [
        ("Prefers tea over coffee", "Ana prefers tea to coffee."),
        ("Is vegetarian", "vegetarian!"),
        ("Prefers answers in bullet points", "I prefer my answers in bullet points"),
    ]
    different = [
        ("Likes tea", "Does not like tea"),
        ("I like coffee", "I don't like coffee"),
        ("Has a dog named Pixel", "Has a cat named Pixel"),
        ("Flight AF123 on Friday", "Flight AF124 on Friday"),
        ("Lives in Porto since May", "Lives in Porto since May 2021"),
        ("Answer in French with metric units", "Answer in German with metric units"),
        ("Works as a nurse", "Works as a nurse in Lyon"),
    ]
    for first, second in same:
        assert near_duplicates(gist(first), gist(second)), (first, second)
    for first, second in different:
        assert not near_duplicates(gist(first), gist(second)), (first, second)


def test_render_leaves_the_header_to_the_context() -> None:
    """The context's synopsis section has one header ("What is known about the user:"),
    then the identity, then the context tier under its own line."""
    s = Synopsis("alice", "Facts: Is a nurse.", "Goals: Run in October.", T0)
    assert s.render() == "Facts: Is a nurse.\n\nCurrent context:\nGoals: Run in October."
    assert Synopsis("alice", "", "Goals: Run.", T0).render() == "Current context:\nGoals: Run."


def test_offline_with_no_memories_is_empty() -> None:
    s = SynopsisGenerator().generate("alice", [])
    assert (s.identity, s.context, s.render()) == ("", "", "")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_items": 0}, InvalidSizeError),
        ({"max_chars": 5}, InvalidSizeError),
        ({"llm": 42}, InvalidTypeError),
    ],
)
def test_generator_rejects_bad_settings(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        SynopsisGenerator(**kwargs)


def test_generator_rejects_bad_input() -> None:
    generator = SynopsisGenerator()
    with pytest.raises(MissingUserError):
        generator.generate("", MEMORIES)
    with pytest.raises(InvalidTypeError, match="memories"):
        generator.generate("alice", "My name is Alice")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"memories\[1\]"):
        generator.generate("alice", [MEMORIES[0], {"content": "x"}])  # type: ignore[list-item]


# -- LLM generator (fake OpenAI server) -----------------------------------------------


def test_llm_synopsis_uses_the_prompt_and_parses_sections(fake_server: FakeServer) -> None:
    fake_server.chat_reply = lambda body: (
        "IDENTITY: Alice Martin, a vegetarian nurse in Lyon who likes bullet points.\n"
        "CONTEXT: Training for an October half marathon; asking about trail shoes."
    )
    s = SynopsisGenerator(llm_for(fake_server)).generate("alice", MEMORIES)
    assert s.source == "llm"
    assert s.identity.startswith("Alice Martin, a vegetarian nurse")
    assert s.context.startswith("Training for an October half marathon")
    prompt = fake_server.requests[0].json["messages"][-1]["content"]
    assert prompt.startswith("Create a user profile from these memories")
    assert "Works as a nurse in Lyon" in prompt and "trail running" in prompt
    assert "golf" not in prompt  # another user's memory is never sent


@pytest.mark.parametrize(
    "answer",
    [
        "## Identity\nAlice, nurse.\n\n## Context\nMarathon training.",
        "**Identity:** Alice, nurse.\n**Context:** Marathon training.",
        "Context: Marathon training.\nIdentity: Alice, nurse.",
        '```json\n{"identity": "Alice, nurse.", "context": "Marathon training."}\n```',
        "Here is the profile.\n1. IDENTITY - Alice, nurse.\n2. CONTEXT - Marathon training.",
    ],
)
def test_parse_sections_accepts_common_formats(answer: str) -> None:
    assert parse_sections(answer) == ("Alice, nurse.", "Marathon training.")


def test_parse_sections_blanks_unknown_and_keeps_context_words_in_text() -> None:
    assert parse_sections("IDENTITY: unknown\nCONTEXT: Context matters to her: moving.") == (
        "",
        "Context matters to her: moving.",
    )


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "I'm sorry, I can't help with that.",
        "IDENTITY: Alice only",
        "IDENTITY: none\nCONTEXT: unknown",
        '{"identity": ["a"], "context": null}',
        "{{{{",
    ],
)
def test_malformed_llm_output_falls_back_offline(
    fake_server: FakeServer, answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake_server.chat_reply = lambda body: answer
    with caplog.at_level(logging.WARNING, logger="tiermem.synopsis"):
        s = SynopsisGenerator(llm_for(fake_server)).generate("alice", MEMORIES)
    offline = SynopsisGenerator().generate("alice", MEMORIES)
    assert (s.identity, s.context, s.source) == (offline.identity, offline.context, "offline")
    assert "falls back to offline" in caplog.text


def test_provider_errors_and_timeouts_fall_back_offline(fake_server: FakeServer) -> None:
    fake_server.fail_next(500)
    assert SynopsisGenerator(llm_for(fake_server)).generate("alice", MEMORIES).source == "offline"
    fake_server.enqueue(Reply(delay=60.0))  # answered only when the server stops
    s = SynopsisGenerator(llm_for(fake_server, timeout=0.2)).generate("alice", MEMORIES)
    assert s.source == "offline" and fake_server.answered == 1  # the 500; gave up on the slow one
    fake_server.enqueue(Reply(body=b"<html>not json</html>"))
    assert SynopsisGenerator(llm_for(fake_server)).generate("alice", MEMORIES).source == "offline"


def test_no_memories_means_no_llm_call(fake_server: FakeServer) -> None:
    s = SynopsisGenerator(llm_for(fake_server)).generate("alice", [MEMORIES[-1]])  # Bob's only
    assert s.render() == "" and fake_server.requests == []


async def test_agenerate_over_http(fake_server: FakeServer) -> None:
    fake_server.chat_reply = lambda body: "Identity: Alice.\nContext: Running."
    llm = llm_for(fake_server)
    s = await SynopsisGenerator(llm).agenerate("alice", MEMORIES)
    assert (s.identity, s.context, s.source) == ("Alice.", "Running.", "llm")
    fake_server.chat_reply = lambda body: "no sections"
    assert (await SynopsisGenerator(llm).agenerate("alice", MEMORIES)).source == "offline"


def test_long_llm_sections_are_cut_to_max_chars(fake_server: FakeServer) -> None:
    fake_server.chat_reply = lambda body: "IDENTITY: " + "tall " * 500 + "\nCONTEXT: short"
    s = SynopsisGenerator(llm_for(fake_server), max_chars=100).generate("alice", MEMORIES)
    assert len(s.identity) <= 100 and s.identity.endswith("…") and s.context == "short"


# -- service ---------------------------------------------------------------------------


class Fetch:
    """A fetch_memories that counts its calls and can be slowed down."""

    def __init__(self, memories: Sequence[MemoryRecord] = MEMORIES, delay: float = 0) -> None:
        self.memories = list(memories)
        self.calls = 0
        self.delay = delay
        self._lock = threading.Lock()

    def __call__(self, user_id: str) -> list[MemoryRecord]:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        return [m for m in self.memories if m.user_id == user_id]


def service(clock: FakeClock, fetch: Fetch, **kw: Any) -> SynopsisService:
    cache = InMemorySynopsisCache(identity_ttl=100, context_ttl=10, clock=clock)
    return SynopsisService(cache, fetch_memories=fetch, **kw)


def test_get_generates_once_then_hits() -> None:
    fetch = Fetch()
    svc = service(FakeClock(), fetch)
    first = svc.get("alice")
    assert svc.get("alice") == first and fetch.calls == 1
    assert "Alice Martin" in first.identity


def test_context_tier_regenerates_alone_when_it_expires() -> None:
    clock, fetch = FakeClock(), Fetch()
    svc = service(clock, fetch, refresh_on_access=False)
    first = svc.get("alice")
    fetch.memories.append(record("Wants to learn Italian", "context", days=20))
    fetch.memories.append(record("My name is Alicia now", "fact", 1.0, days=20))
    clock.now += 11  # context expired, identity not
    second = svc.get("alice")
    assert fetch.calls == 2
    assert second.identity == first.identity  # identity kept for its own TTL
    assert "Italian" in second.context


def test_refresh_on_access_keeps_a_busy_users_tiers() -> None:
    clock, fetch = FakeClock(), Fetch()
    svc = service(clock, fetch, refresh_on_access=True)
    svc.get("alice")
    for _ in range(5):
        clock.now += 8  # each step is within the context TTL of the previous access
        svc.get("alice")
    assert fetch.calls == 1
    idle = service(clock, Fetch(), refresh_on_access=False)
    idle.get("alice")
    for _ in range(5):
        clock.now += 8
        idle.get("alice")
    assert idle.fetch_memories.calls > 1  # type: ignore[union-attr]


def test_invalidate_and_memory_added() -> None:
    fetch = Fetch()
    svc = service(FakeClock(), fetch)
    svc.get("alice")
    assert svc.memory_added("alice", "message") == 0  # messages wait for the context TTL
    assert svc.memory_added("alice", "preference") == 1
    assert set(svc.cache.get_tiers("alice")) == {"context"}
    assert svc.memory_added("alice", "context") == 1
    svc.get("alice")
    assert svc.invalidate("alice") == 2
    svc.get("alice")
    assert fetch.calls == 3


def test_generate_synopsis_has_the_seed_shape_and_caches_both_tiers() -> None:
    fetch = Fetch()
    svc = service(FakeClock(), fetch)
    synopsis = svc.generate_synopsis("alice")  # seed 001: generate_synopsis(user_id)
    assert isinstance(synopsis, Synopsis)
    assert svc.cache.get("alice", "identity") == synopsis.tier("identity")
    assert svc.cache.get("alice", "context") == synopsis.tier("context")
    svc.generate_synopsis("alice")
    assert fetch.calls == 2  # always regenerates


def test_llm_fallback_identity_is_cached_only_for_the_context_ttl(fake_server: FakeServer) -> None:
    fake_server.chat_reply = lambda body: "garbage"
    clock = FakeClock()
    cache = InMemorySynopsisCache(identity_ttl=100, context_ttl=10, clock=clock)
    svc = SynopsisService(cache, SynopsisGenerator(llm_for(fake_server)), fetch_memories=Fetch())
    assert svc.get("alice").source == "offline"  # at once; the LLM is asked in the background
    until(lambda: fake_server.answered == 1)
    entry = cache.get("alice", "identity")
    assert entry is not None and entry.source == "offline"  # its answer was unusable
    clock.now += 11
    assert cache.get("alice", "identity") is None  # retried soon, not in 7 days
    fake_server.chat_reply = lambda body: "IDENTITY: Alice.\nCONTEXT: Running."
    assert svc.get("alice").source == "offline"  # the miss is answered at once...
    until(lambda: svc.get("alice").source == "llm")  # ...and the LLM's replaces it
    assert svc.get("alice").identity == "Alice." and len(fake_server.requests) == 2
    clock.now += 11
    assert cache.get("alice", "identity") is not None  # a real LLM identity keeps its TTL


def test_a_read_never_waits_on_the_llm(fake_server: FakeServer) -> None:
    """A miss returns the offline synopsis while the LLM's request hangs; one request per
    user however many reads; the LLM's tiers replace the offline ones once it answers,
    unless they were invalidated meanwhile."""
    fake_server.chat_reply = lambda body: "IDENTITY: Alice.\nCONTEXT: Running."
    fake_server.pause()  # every request hangs until resume()
    svc = SynopsisService(generator=SynopsisGenerator(llm_for(fake_server)), fetch_memories=Fetch())
    start = time.perf_counter()
    for _ in range(20):
        assert svc.get("alice").source == "offline"
    assert asyncio.run(svc.aget("alice")).source == "offline"
    assert time.perf_counter() - start < 1.0  # loose: the point is that none waited
    until(lambda: len(fake_server.requests) == 1)
    fake_server.resume()
    until(lambda: svc.get("alice").source == "llm")
    assert len(fake_server.requests) == 1

    svc.invalidate("alice")
    fake_server.pause(after=1)
    assert svc.get("alice").source == "offline"
    until(lambda: len(fake_server.requests) == 2)
    svc.invalidate("alice")  # what the LLM writes now would be stale: it is dropped
    fake_server.resume()
    until(lambda: not svc._writing)
    assert svc.cache.get_tiers("alice") == {}


def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``check()`` holds (background work), failing after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_concurrent_misses_generate_once() -> None:
    fetch = Fetch(delay=0.2)
    svc = service(FakeClock(), fetch)
    results: list[Synopsis] = []
    threads = [threading.Thread(target=lambda: results.append(svc.get("alice"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fetch.calls == 1
    assert len({(r.identity, r.context) for r in results}) == 1


async def test_async_service_with_sync_and_async_fetch() -> None:
    fetch = Fetch()
    svc = service(FakeClock(), fetch)

    async def afetch(user_id: str) -> list[MemoryRecord]:
        return fetch(user_id)

    first = await svc.aget("alice", afetch)
    assert await svc.aget("alice") == first and fetch.calls == 1
    assert await svc.ainvalidate("alice", "identity") == 1
    assert await svc.amemory_added("alice", "context") == 1
    assert (await svc.agenerate_synopsis("alice", afetch)).identity == first.identity
    assert fetch.calls == 2


def test_service_input_errors() -> None:
    svc = SynopsisService()
    with pytest.raises(InvalidTypeError, match="fetch_memories"):
        svc.get("alice")

    async def afetch(user_id: str) -> list[MemoryRecord]:
        return []

    with pytest.raises(InvalidTypeError, match="async"):
        svc.get("alice", afetch)  # type: ignore[arg-type]
    with pytest.raises(MissingUserError):
        svc.get("", lambda u: [])
    with pytest.raises(InvalidTypeError, match="cache"):
        SynopsisService(cache={})  # type: ignore[arg-type]


def test_service_over_redis(redis_url: str) -> None:
    cache = RedisSynopsisCache(redis_url, namespace=f"tiermem-test-{uuid.uuid4().hex[:12]}")
    try:
        fetch = Fetch()
        svc = SynopsisService(cache, fetch_memories=fetch)
        first = svc.get("alice")
        assert SynopsisService(cache, fetch_memories=fetch).get("alice") == first  # shared
        assert fetch.calls == 1
    finally:
        cache.clear()
        cache.close()


# -- backend specifics -----------------------------------------------------------------


def test_in_memory_cache_is_bounded_lru() -> None:
    clock = FakeClock()
    cache = InMemorySynopsisCache(clock=clock, max_entries=4)
    entry = SynopsisTier("x", T0, "offline")
    for user in "abcd":
        cache.set(user, "identity", entry)
    cache.get("a", "identity")  # a is now the most recently used
    cache.set("e", "identity", entry)
    assert len(cache) == 4
    assert cache.get("b", "identity") is None and cache.get("a", "identity") == entry
    with pytest.raises(InvalidSizeError):
        InMemorySynopsisCache(max_entries=1)


def test_redis_down_raises_cache_error() -> None:
    cache = RedisSynopsisCache("redis://:hunter2@127.0.0.1:1/0", timeout=0.5)
    with pytest.raises(CacheError) as info:
        cache.get("alice", "identity")
    message = str(info.value)
    assert "redis-server" in message and "memory.synopsis.backend" in message
    assert "127.0.0.1:1" in message and "hunter2" not in message
    assert "hunter2" not in repr(cache)
    with pytest.raises(CacheError):
        SynopsisService(cache, fetch_memories=Fetch()).get("alice")
    with pytest.raises(CacheError):
        cache.ping()


async def test_redis_down_async_raises_cache_error() -> None:
    cache = RedisSynopsisCache("redis://127.0.0.1:1/0", timeout=0.5)
    with pytest.raises(CacheError, match=r"Redis at redis://127\.0\.0\.1:1/0"):
        await cache.aset("alice", "context", SynopsisTier("x", T0, "offline"))
    with pytest.raises(CacheError):
        await cache.aclear()
    await cache.aclose()


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "127.0.0.1:6379", 6379])
def test_redis_rejects_non_redis_urls(url: Any) -> None:
    with pytest.raises(ConfigError, match="redis_url"):
        RedisSynopsisCache(url)


def test_redact_url() -> None:
    assert redact_url("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"
    assert redact_url("postgresql://u:pw@h/db?x=1") == "postgresql://u:***@h/db?x=1"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"


def test_cache_from_config(redis_url: str) -> None:
    config = TiermemConfig.load({"memory": {"synopsis": {"identity_ttl": 60, "context_ttl": 5}}})
    cache = cache_from_config(config.memory.synopsis)
    assert isinstance(cache, InMemorySynopsisCache)
    assert cache.ttls == {"identity": 60, "context": 5}
    settings = {"backend": "redis", "redis_url": redis_url, "namespace": "tm-cfg-test"}
    redis_cache = cache_from_config(
        TiermemConfig.load({"memory": {"synopsis": settings}}).memory.synopsis
    )
    assert isinstance(redis_cache, RedisSynopsisCache) and redis_cache.namespace == "tm-cfg-test"
    redis_cache.ping()
    redis_cache.close()


@pytest.fixture
def redis_url() -> str:
    from conformance.test_synopsis_cache import redis_reachable

    if not redis_reachable():
        pytest.skip("Redis is not reachable on 127.0.0.1:6379 (CI starts it)")
    return "redis://127.0.0.1:6379/0"


def test_docs_quick_start_runs_and_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "synopsis.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    exec(compile(code, "docs/synopsis.md", "exec"), {})
    expected = [
        line.removeprefix("# ").removeprefix("#")
        for line in code.splitlines()
        if line.startswith("#")
    ]
    assert capsys.readouterr().out.splitlines() == expected


async def test_concurrent_async_misses_generate_once() -> None:
    import asyncio

    calls = 0

    async def slow_fetch(user_id: str) -> list[MemoryRecord]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.1)
        return [m for m in MEMORIES if m.user_id == user_id]

    svc = SynopsisService(InMemorySynopsisCache())
    results = await asyncio.gather(*(svc.aget("alice", slow_fetch) for _ in range(8)))
    assert calls == 1 and len({r.identity for r in results}) == 1
