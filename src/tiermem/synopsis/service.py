"""Cached synopses: a hit per tier, generation on a miss, invalidation on new facts.

A read never waits on the LLM: on a miss it caches and returns the offline synopsis,
and the LLM's is written in the background (:func:`~tiermem.runner.shared_pool`),
behind the model's circuit breaker, replacing it for the reads after.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from tiermem.aio.twins import (
    Call,
    Calls,
    Gather,
    Steps,
    adrive,
    drive,
    either,
    stepped,
    stepped_twin,
)
from tiermem.breaker import breaker_for
from tiermem.errors import InvalidTypeError
from tiermem.runner import shared_pool
from tiermem.synopsis.cache import InMemorySynopsisCache, SynopsisCache
from tiermem.synopsis.generator import SynopsisGenerator
from tiermem.synopsis.redis import RedisSynopsisCache
from tiermem.types.checks import check_user_id
from tiermem.types.records import MemoryRecord
from tiermem.types.synopsis import IDENTITY_TYPES, TIERS, Synopsis, SynopsisTier, Tier

if TYPE_CHECKING:
    from tiermem.config.model import SynopsisConfig

log = logging.getLogger(__name__)

THREADS = 2
"""Threads shared by every service of the process, writing LLM synopses in the background."""
AsyncFetchMemories = Callable[[str], Sequence[MemoryRecord] | Awaitable[Sequence[MemoryRecord]]]


def cache_from_config(settings: SynopsisConfig) -> SynopsisCache:
    """The cache ``memory.synopsis`` describes (``backend: memory`` or ``redis``)."""
    if settings.backend == "redis":
        return RedisSynopsisCache(
            settings.redis_url.get_secret_value(),
            settings.namespace,
            settings.identity_ttl,
            settings.context_ttl,
        )
    return InMemorySynopsisCache(settings.identity_ttl, settings.context_ttl, settings.namespace)


class _KeyedLocks:
    """One lock per key, dropped when nobody holds or waits on it (single-flight)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._locks: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._guard = threading.Lock()

    def get(self, key: str) -> Any:
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._factory()
                self._locks[key] = lock
            return lock


class SynopsisService(Calls):
    """Cached synopses: a hit per tier, generation on a miss, invalidation on new facts.

    Args:
        cache: where tiers live (default: in process, default TTLs).
        generator: how synopses are written (default: offline).
        refresh_on_access: a hit re-arms the tier's TTL (sliding expiry), so an active
            user's identity stays cached until it is invalidated.
        fetch_memories: default ``user_id -> memories`` used when a call gives none
            (the facade binds its store here). It should return the user's memories of
            types fact, preference, context, summary and recent messages; the generator
            uses at most ``max_items`` per tier.

    A read (:meth:`get`, :meth:`aget`) never calls the LLM: on a miss the offline
    synopsis is cached (for the context TTL only) and returned at once, and the LLM's
    is written in the background, behind the model's circuit breaker (none while it is
    open), for the reads after. :meth:`generate_synopsis` calls the LLM itself. When the
    LLM fails, the offline tiers stay, cached only for the context TTL, so the LLM is
    asked again soon. Concurrent misses for the same user generate once (per process).
    """

    def __init__(
        self,
        cache: SynopsisCache | None = None,
        generator: SynopsisGenerator | None = None,
        *,
        refresh_on_access: bool = True,
        fetch_memories: AsyncFetchMemories | None = None,
    ) -> None:
        self.cache = cache if cache is not None else InMemorySynopsisCache()
        self.generator = generator if generator is not None else SynopsisGenerator()
        if not isinstance(self.cache, SynopsisCache):
            raise InvalidTypeError("cache", f"expected a SynopsisCache, got {type(cache).__name__}")
        if not isinstance(self.generator, SynopsisGenerator):
            raise InvalidTypeError(
                "generator", f"expected a SynopsisGenerator, got {type(generator).__name__}"
            )
        self.refresh_on_access = bool(refresh_on_access)
        self.fetch_memories = fetch_memories
        self._locks = _KeyedLocks(threading.Lock)
        self._alocks = _KeyedLocks(asyncio.Lock)
        self._writing: set[str] = set()  # users whose LLM synopsis is being written
        self._writing_lock = threading.Lock()

    @stepped
    def get(
        self,
        user_id: str,
        fetch_memories: AsyncFetchMemories | None = None,
        *,
        generation: int | None = None,
    ) -> Steps[Synopsis]:
        """The user's synopsis: cached tiers where present, the rest written offline at
        once and cached (the LLM's in the background, for the reads after).

        ``generation``: the user's change generation, read before the memories; a tier
        cached at another one is stale (the user's data changed since) and written again.
        Async: ``fetch_memories`` may be a coroutine function.
        """
        user_id = check_user_id(user_id)
        fetch = self._fetch(fetch_memories)
        cache = self.cache
        tiers = yield Call(
            cache.get_tiers, cache.aget_tiers, user_id, refresh=self.refresh_on_access
        )
        cached = _current(tiers, generation)
        if len(cached) == len(TIERS):
            return Synopsis.from_tiers(user_id, cached)
        made, later = yield _Locked(user_id, self._missed(user_id, fetch, generation))
        if later is not None:
            records, parts = later
            self._write_later(user_id, records, parts, generation)
        return cast(Synopsis, made)

    aget = stepped_twin(get)

    def _missed(
        self, user_id: str, fetch: AsyncFetchMemories, generation: int | None
    ) -> Steps[tuple[Synopsis, tuple[Sequence[MemoryRecord], _Parts] | None]]:
        """A miss, under the user's lock: the tiers another call cached meanwhile, or the
        missing ones written offline and cached (with what the LLM's rewrite needs)."""
        cache = self.cache
        cached = _current((yield Call(cache.get_tiers, cache.aget_tiers, user_id)), generation)
        if len(cached) == len(TIERS):
            return Synopsis.from_tiers(user_id, cached), None
        records = yield _fetched(fetch, user_id)
        parts = self._parts(cached, self.generator.offline(user_id, records), generation)
        yield self._saving(user_id, parts)
        return parts.synopsis(user_id), (records, parts)

    def _step(self, wait: Call | Gather | _Locked, /) -> Any:
        """Run a wait; a :class:`_Locked` section under the user's thread lock."""
        if isinstance(wait, _Locked):
            with self._locks.get(wait.user_id):
                return drive(wait.steps, self._step)
        return super()._step(wait)

    async def _astep(self, wait: Call | Gather | _Locked, /) -> Any:
        """:meth:`_step` awaited; a :class:`_Locked` section under the user's asyncio lock."""
        if isinstance(wait, _Locked):
            async with self._alocks.get(wait.user_id):
                return await adrive(wait.steps, self._astep)
        return await super()._astep(wait)

    @stepped
    def generate_synopsis(
        self,
        user_id: str,
        fetch_memories: AsyncFetchMemories | None = None,
        *,
        generation: int | None = None,
    ) -> Steps[Synopsis]:
        """Seed 001's ``generate_synopsis``: regenerate from all memories and cache both
        tiers (async: ``fetch_memories`` may be a coroutine function)."""
        user_id = check_user_id(user_id)
        fetch = self._fetch(fetch_memories)
        records = yield _fetched(fetch, user_id)
        generator = self.generator
        fresh = yield Call(generator.generate, generator.agenerate, user_id, records)
        parts = self._parts({}, fresh, generation)
        yield self._saving(user_id, parts)
        return parts.synopsis(user_id)

    agenerate_synopsis = stepped_twin(generate_synopsis)

    @stepped
    def invalidate(self, user_id: str, tier: Tier | None = None) -> Steps[int]:
        """Drop the user's cached tiers (both by default); the next ``get`` regenerates."""
        return cast(int, (yield self._invalidation(user_id, tier)))

    ainvalidate = stepped_twin(invalidate)

    @stepped
    def memory_added(self, user_id: str, memory_type: str) -> Steps[int]:
        """Invalidate what a new memory makes stale: a fact or preference the identity
        tier, a context memory the context tier; other types wait for the context TTL."""
        tier = stale_tier(memory_type)
        return 0 if tier is None else cast(int, (yield self._invalidation(user_id, tier)))

    amemory_added = stepped_twin(memory_added)

    def _invalidation(self, user_id: str, tier: Tier | None) -> Call:
        return Call(self.cache.invalidate, self.cache.ainvalidate, user_id, tier)

    def _write_later(
        self,
        user_id: str,
        records: Sequence[MemoryRecord],
        parts: _Parts,
        generation: int | None,
    ) -> None:
        """Have the LLM write the tiers ``parts`` wrote offline, in the background: not
        while its breaker rests, nor twice at once for a user."""
        llm = self.generator.llm
        if llm is None or not records or breaker_for(llm).retry_in() > 0:
            return
        with self._writing_lock:
            if user_id in self._writing:
                return
            self._writing.add(user_id)
        try:
            shared_pool("synopsis", THREADS).submit(
                self._write_llm, user_id, list(records), parts, generation
            )
        except RuntimeError:  # the interpreter is exiting: the offline tiers stay
            self._done_writing(user_id)

    def _write_llm(
        self,
        user_id: str,
        records: list[MemoryRecord],
        offline: _Parts,
        generation: int | None,
    ) -> None:
        """The LLM's tiers in place of the offline ones still cached (one invalidated or
        rewritten meanwhile is left alone: what replaced it is newer)."""
        try:
            fresh = self.generator.generate(user_id, records)
            if fresh.source != "llm":
                return  # it failed: the offline tiers stay, for the context TTL
            now = self.cache.get_tiers(user_id)
            parts = self._parts({}, fresh, generation)
            kept = {t: e for t, e in parts.missing.items() if now.get(t) == offline.missing.get(t)}
            if kept:
                self.cache.set_tiers(user_id, kept)
        except Exception as exc:  # a cache closed or down: the next read tries again
            log.debug("the LLM synopsis of a user was not written: %s", exc)
        finally:
            self._done_writing(user_id)

    def _done_writing(self, user_id: str) -> None:
        with self._writing_lock:
            self._writing.discard(user_id)

    def _fetch(self, given: AsyncFetchMemories | None) -> AsyncFetchMemories:
        fetch = given if given is not None else self.fetch_memories
        if fetch is None or not callable(fetch):
            raise InvalidTypeError(
                "fetch_memories",
                f"expected a callable user_id -> memories, got {fetch!r}",
                "pass fetch_memories= to the call or to SynopsisService()",
            )
        return fetch

    def _saving(self, user_id: str, parts: _Parts) -> Call:
        """The wait that caches the tiers ``parts`` wrote."""
        cache = self.cache
        return Call(cache.set_tiers, cache.aset_tiers, user_id, parts.missing, ttl=parts.ttl)

    def _parts(
        self, cached: dict[Tier, SynopsisTier], fresh: Synopsis, generation: int | None = None
    ) -> _Parts:
        fell_back = self.generator.llm is not None and fresh.source == "offline"
        missing = {
            t: replace(fresh.tier(t), generation=generation) for t in TIERS if t not in cached
        }
        return _Parts(cached, missing, self.cache.ttls["context"] if fell_back else None)


class _Locked(NamedTuple):
    """A wait of :meth:`SynopsisService.get`: ``steps`` driven under the user's lock (a
    thread lock, or an asyncio lock when awaited)."""

    user_id: str
    steps: Steps[Any]


@dataclass(frozen=True)
class _Parts:
    """The tiers found in the cache, the ones generated for it, and their TTL override."""

    cached: dict[Tier, SynopsisTier]
    missing: dict[Tier, SynopsisTier]
    ttl: float | None

    def synopsis(self, user_id: str) -> Synopsis:
        return Synopsis.from_tiers(user_id, {**self.cached, **self.missing})


def _current(tiers: dict[Tier, SynopsisTier], generation: int | None) -> dict[Tier, SynopsisTier]:
    """The tiers written at ``generation`` (all of them when it is None)."""
    if generation is None:
        return tiers
    return {t: e for t, e in tiers.items() if e.generation == generation}


def stale_tier(memory_type: str) -> Tier | None:
    """The tier a new memory of ``memory_type`` makes stale, if any."""
    if memory_type in IDENTITY_TYPES:
        return "identity"
    return "context" if memory_type == "context" else None


def _fetched(fetch: AsyncFetchMemories, user_id: str) -> Call:
    """The wait on the caller's ``fetch_memories`` (a coroutine function only when awaited)."""
    return either(fetch, user_id, refused=_async_fetch)


def _async_fetch() -> InvalidTypeError:
    return InvalidTypeError(
        "fetch_memories", "is async; call aget/agenerate_synopsis or pass a sync function"
    )
