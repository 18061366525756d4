"""One conformance suite for every SynopsisCache backend: in process and real Redis.

Expiry is driven by a controllable clock for the in-process cache and by real short
TTLs (and real waiting) on Redis; the tests only talk to the harness, so both backends
pass the same assertions. Each Redis test uses its own namespace and deletes it after.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from tiermem.errors import InvalidSizeError, InvalidTypeError, MissingUserError
from tiermem.synopsis import CacheSet, InMemorySynopsisCache, RedisSynopsisCache, SynopsisCache
from tiermem.types.synopsis import Synopsis, SynopsisTier

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
# Real Redis waits are real seconds: keep TTLs short but well above scheduling noise.
IDENTITY_TTL, CONTEXT_TTL = 1.2, 0.4


def redis_reachable() -> bool:
    try:
        with socket.create_connection((REDIS_HOST, REDIS_PORT), timeout=0.5):
            return True
    except OSError:
        return False


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    """Builds caches of one backend and lets time pass for them."""

    backend: str
    make: Callable[..., SynopsisCache]
    advance: Callable[[float], None]


@pytest.fixture(params=["memory", "redis"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    made: list[SynopsisCache] = []
    if request.param == "memory":
        clock = FakeClock()

        def make_memory(**kw: object) -> SynopsisCache:
            kw.setdefault("identity_ttl", IDENTITY_TTL)
            kw.setdefault("context_ttl", CONTEXT_TTL)
            return InMemorySynopsisCache(clock=clock, **kw)  # type: ignore[arg-type]

        def tick(seconds: float) -> None:
            clock.now += seconds

        yield Harness("memory", make_memory, tick)
        return
    if not redis_reachable():
        pytest.skip(f"Redis is not reachable on {REDIS_HOST}:{REDIS_PORT} (CI starts it)")
    base = f"tiermem-test-{uuid.uuid4().hex[:12]}"

    def make_redis(**kw: object) -> SynopsisCache:
        kw.setdefault("identity_ttl", IDENTITY_TTL)
        kw.setdefault("context_ttl", CONTEXT_TTL)
        kw.setdefault("namespace", base)
        cache = RedisSynopsisCache(f"redis://{REDIS_HOST}:{REDIS_PORT}/0", **kw)  # type: ignore[arg-type]
        made.append(cache)
        return cache

    yield Harness("redis", make_redis, time.sleep)
    for cache in made:
        cache.clear()
        cache.close()


def tier(text: str, source: str = "offline") -> SynopsisTier:
    when = datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=timezone.utc)
    return SynopsisTier(text, when, source)  # type: ignore[arg-type]


def test_empty_cache_misses(harness: Harness) -> None:
    cache = harness.make()
    assert cache.get("alice", "identity") is None
    assert cache.get_tiers("alice") == {}
    assert cache.invalidate("alice") == 0


def test_set_then_get_round_trips_each_tier(harness: Harness) -> None:
    cache = harness.make()
    cache.set("alice", "identity", tier("Name: Alice — likes 茶 and émigré novels", "llm"))
    cache.set("alice", "context", tier(""))
    assert cache.get("alice", "identity") == tier("Name: Alice — likes 茶 and émigré novels", "llm")
    assert cache.get("alice", "context") == tier("")  # an empty tier is a hit, not a miss
    assert set(cache.get_tiers("alice")) == {"identity", "context"}


def test_set_synopsis_and_from_tiers_round_trip(harness: Harness) -> None:
    cache = harness.make()
    original = Synopsis("u1", "Facts: likes tea.", "Goals: trip.", tier("").generated_at, "llm")
    cache.set_synopsis(original)
    assert Synopsis.from_tiers("u1", cache.get_tiers("u1")) == original


def test_tiers_expire_on_their_own_ttls(harness: Harness) -> None:
    cache = harness.make()
    cache.set("u", "identity", tier("id"))
    cache.set("u", "context", tier("ctx"))
    harness.advance(CONTEXT_TTL + 0.15)
    assert cache.get("u", "context") is None
    assert cache.get("u", "identity") == tier("id")
    harness.advance(IDENTITY_TTL - CONTEXT_TTL)
    assert cache.get_tiers("u") == {}


def test_refresh_rearms_the_ttl_and_plain_get_does_not(harness: Harness) -> None:
    cache = harness.make()
    for user in ("refreshed", "plain"):
        cache.set(user, "context", tier(user))
    harness.advance(CONTEXT_TTL * 0.6)
    assert cache.get("refreshed", "context", refresh=True) is not None
    assert cache.get("plain", "context") is not None
    harness.advance(CONTEXT_TTL * 0.6)
    assert cache.get("refreshed", "context") == tier("refreshed")
    assert cache.get("plain", "context") is None


def test_ttl_override_applies_to_given_tiers(harness: Harness) -> None:
    cache = harness.make()
    cache.set_tiers("u", {"identity": tier("short")}, ttl=CONTEXT_TTL)
    harness.advance(CONTEXT_TTL + 0.15)
    assert cache.get("u", "identity") is None


def test_invalidate_one_tier_or_both(harness: Harness) -> None:
    cache = harness.make()
    cache.set_tiers("u", {"identity": tier("i"), "context": tier("c")})
    assert cache.invalidate("u", "context") == 1
    assert set(cache.get_tiers("u")) == {"identity"}
    assert cache.invalidate("u", "context") == 0
    cache.set("u", "context", tier("c2"))
    assert cache.invalidate("u") == 2
    assert cache.get_tiers("u") == {}


@pytest.mark.parametrize("other", ["bob", "alice:bob", "alice ", "ALICE", "ali*", "x" * 255])
def test_users_never_see_or_lose_each_others_tiers(harness: Harness, other: str) -> None:
    cache = harness.make()
    cache.set_tiers("alice", {"identity": tier("alice-i"), "context": tier("alice-c")})
    cache.set_tiers(other, {"identity": tier("other-i"), "context": tier("other-c")})
    assert cache.get("alice", "identity") == tier("alice-i")
    assert cache.get(other, "identity") == tier("other-i")
    assert cache.clear_user(other) == 2
    assert set(cache.get_tiers("alice")) == {"identity", "context"}


def test_namespaces_are_separate_and_clear_stays_in_its_own(harness: Harness) -> None:
    one = harness.make()
    two = harness.make(namespace=f"{one.namespace}-2")
    try:
        one.set("u", "identity", tier("one"))
        two.set("u", "identity", tier("two"))
        assert one.get("u", "identity") == tier("one")
        assert one.clear() >= 1
        assert one.get("u", "identity") is None
        assert two.get("u", "identity") == tier("two")
    finally:
        two.clear()


def test_unreadable_cached_value_is_a_miss(harness: Harness) -> None:
    cache = harness.make()
    cache.batch([CacheSet(cache.key("identity", "u"), "not json {", 60)])
    cache.batch([CacheSet(cache.key("context", "u"), '{"text": 3, "source": "llm"}', 60)])
    assert cache.get_tiers("u") == {}


@pytest.mark.parametrize("user_id", ["", None])
def test_missing_user_is_rejected(harness: Harness, user_id: object) -> None:
    cache = harness.make()
    with pytest.raises(MissingUserError):
        cache.get(user_id, "identity")  # type: ignore[arg-type]


def test_bad_input_is_rejected_and_writes_nothing(harness: Harness) -> None:
    cache = harness.make()
    with pytest.raises(InvalidTypeError, match="tier"):
        cache.get("u", "profile")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="user_id"):
        cache.get(42, "identity")  # type: ignore[arg-type]
    with pytest.raises(InvalidSizeError, match="ttl"):
        cache.set("u", "identity", tier("x"), ttl=-1)
    with pytest.raises(InvalidTypeError, match="entries"):
        cache.set_tiers("u", {"identity": tier("ok"), "context": "plain text"})  # type: ignore[dict-item]
    assert cache.get_tiers("u") == {}  # the valid half was not written either


@pytest.mark.parametrize("ttl", [0, -3600, float("nan"), float("inf"), "3600", True])
def test_bad_ttls_are_rejected_at_construction(harness: Harness, ttl: object) -> None:
    with pytest.raises((InvalidSizeError, InvalidTypeError), match="context_ttl"):
        harness.make(context_ttl=ttl)


def test_thread_safety_under_concurrent_users(harness: Harness) -> None:
    cache = harness.make(identity_ttl=60, context_ttl=60)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(25):
                user = f"user-{n}-{i % 5}"
                cache.set(user, "identity", tier(f"{user}-{i}"))
                got = cache.get(user, "identity")
                assert got is not None and got.text.startswith(f"{user}-")
                if i % 7 == 0:
                    cache.invalidate(user, "identity")
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for n in range(8):
        for j in range(5):
            got = cache.get(f"user-{n}-{j}", "identity")
            assert got is None or got.text.startswith(f"user-{n}-{j}-")


async def test_async_twins_match_the_sync_api(harness: Harness) -> None:
    cache = harness.make()
    try:
        await cache.aset_tiers("u", {"identity": tier("i"), "context": tier("c")})
        assert await cache.aget("u", "identity") == tier("i")
        assert set(await cache.aget_tiers("u", refresh=True)) == {"identity", "context"}
        assert cache.get("u", "context") == tier("c")  # sync and async see the same data
        assert await cache.ainvalidate("u", "identity") == 1
        await cache.aset("v", "context", tier("v"))
        assert await cache.aclear_user("u") == 1
        await cache.aset_synopsis(Synopsis("w", "a", "b", tier("").generated_at))
        assert await cache.aclear() == 3
        assert cache.get_tiers("v") == {}
    finally:
        await cache.aclose()


async def test_concurrent_coroutines(harness: Harness) -> None:
    cache = harness.make(identity_ttl=60, context_ttl=60)

    async def one(n: int) -> SynopsisTier | None:
        await cache.aset(f"c{n}", "context", tier(f"c{n}"))
        return await cache.aget(f"c{n}", "context")

    try:
        results = await asyncio.gather(*(one(n) for n in range(50)))
        assert [r.text if r else None for r in results] == [f"c{n}" for n in range(50)]
    finally:
        await cache.aclose()
