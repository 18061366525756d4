"""A per-user value with an expiry in a bounded table (``tiermem.stores.user_cache``)."""

from __future__ import annotations

import threading

from tiermem.stores.user_cache import UserCache


def test_a_value_is_kept_until_forgotten() -> None:
    cache: UserCache[int] = UserCache(ttl=60.0, most=10)
    assert cache.get("ann") is None
    cache.put("ann", 3)
    assert cache.get("ann") == 3
    cache.put("ann", 4)
    assert cache.get("ann") == 4
    cache.forget("ann")
    assert cache.get("ann") is None


def test_an_expired_value_is_not_served() -> None:
    cache: UserCache[int] = UserCache(ttl=0.0, most=10)
    cache.put("ann", 3)
    assert cache.get("ann") is None


def test_beyond_the_bound_the_value_stored_longest_ago_goes() -> None:
    cache: UserCache[str] = UserCache(ttl=60.0, most=2)
    cache.put("ann", "a")
    cache.put("bob", "b")
    cache.put("ann", "a2")  # stored again: now the newest
    cache.put("cy", "c")
    assert cache.get("bob") is None
    assert (cache.get("ann"), cache.get("cy")) == ("a2", "c")


def test_threads_share_one_bounded_table() -> None:
    cache: UserCache[int] = UserCache(ttl=60.0, most=50)

    def fill(start: int) -> None:
        for i in range(start, start + 500):
            cache.put(f"u{i}", i)

    threads = [threading.Thread(target=fill, args=(n * 500,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = [i for i in range(2000) if cache.get(f"u{i}") == i]
    assert len(kept) == 50
