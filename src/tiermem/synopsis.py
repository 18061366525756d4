"""User synopses (seed 001 "User Synopsis Caching"): a short profile per user, in two tiers.

* **identity** (default TTL 7 days): name, preferences, traits; changes rarely.
* **context** (default TTL 1 hour): recent topics, current goals; changes often.

:class:`SynopsisGenerator` writes a :class:`Synopsis` from a user's memories, with an LLM
when one is configured and deterministically offline otherwise (or when the LLM fails or
answers something unreadable). :class:`SynopsisCache` keeps each tier under its own key
(``{namespace}:identity:{user_id}``, ``{namespace}:context:{user_id}``) with its own TTL,
in process (:class:`InMemorySynopsisCache`) or in Redis (:class:`RedisSynopsisCache`).
:class:`SynopsisService` joins them: a cache hit per tier, generation on a miss,
invalidation when new facts about the user arrive.

A cache backend implements one pair, :meth:`SynopsisCache.batch` / ``abatch``, over three
small operations (:class:`CacheGet`, :class:`CacheSet`, :class:`CacheDelete`), plus
``clear``; every other method is derived here.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import re
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, get_args
from urllib.parse import urlsplit, urlunsplit

from tiermem.errors import CacheError, ConfigError, InvalidSizeError, InvalidTypeError
from tiermem.llm.base import LLM
from tiermem.llm.factory import get_llm
from tiermem.stores.records import MemoryRecord, calculate_importance
from tiermem.stores.validate import check_user_id

if TYPE_CHECKING:
    from tiermem.config import SynopsisConfig

log = logging.getLogger(__name__)

Tier = Literal["identity", "context"]
TIERS: tuple[Tier, ...] = get_args(Tier)
Source = Literal["llm", "offline"]

DEFAULT_IDENTITY_TTL = 604_800  # 7 days, as in seed 001
DEFAULT_CONTEXT_TTL = 3_600  # 1 hour
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_NAMESPACE = "tiermem"

#: Memory types that describe who the user is (identity tier) and what they are doing now.
IDENTITY_TYPES = ("fact", "preference")
CONTEXT_TYPES = ("context", "summary", "message")

FetchMemories = Callable[[str], Sequence[MemoryRecord]]
AsyncFetchMemories = Callable[[str], Sequence[MemoryRecord] | Awaitable[Sequence[MemoryRecord]]]


# -- the synopsis ----------------------------------------------------------------------


@dataclass(frozen=True)
class SynopsisTier:
    """The text of one tier, when and how it was written, and the user's change
    generation it was written at (None: unknown; see :meth:`SynopsisService.get`)."""

    text: str
    generated_at: datetime
    source: Source
    generation: int | None = None

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "text": self.text,
            "generated_at": self.generated_at.isoformat(),
            "source": self.source,
        }
        if self.generation is not None:
            data["generation"] = self.generation
        return json.dumps(data)

    @classmethod
    def from_json(cls, raw: str) -> SynopsisTier | None:
        """Parse a cached value; ``None`` (a miss) when it is not one this module wrote."""
        try:
            data = json.loads(raw)
            source = data["source"]
            generation = data.get("generation")
            if not isinstance(data["text"], str) or source not in get_args(Source):
                return None
            if generation is not None and type(generation) is not int:
                return None
            return cls(data["text"], _parse_time(data["generated_at"]), source, generation)
        except (ValueError, TypeError, KeyError):
            return None


@dataclass(frozen=True)
class Synopsis:
    """A user's profile: ``identity`` (name, preferences, traits) and ``context``
    (recent topics, current goals).

    When the tiers were cached at different times, ``generated_at`` is the older of the
    two and ``source`` is ``"llm"`` only if both came from the LLM.
    """

    user_id: str
    identity: str
    context: str
    generated_at: datetime
    source: Source = "offline"

    def render(self) -> str:
        """The synopsis as text for a prompt; empty when nothing is known about the user."""
        parts = []
        if self.identity.strip():
            parts.append(f"About the user:\n{self.identity.strip()}")
        if self.context.strip():
            parts.append(f"Current context:\n{self.context.strip()}")
        return "\n\n".join(parts)

    def tier(self, tier: Tier) -> SynopsisTier:
        """One tier of this synopsis, as the cache stores it."""
        return SynopsisTier(getattr(self, tier), self.generated_at, self.source)

    @classmethod
    def from_tiers(cls, user_id: str, tiers: Mapping[Tier, SynopsisTier]) -> Synopsis:
        """Join the two cached tiers (both must be present)."""
        identity, context = tiers["identity"], tiers["context"]
        both_llm = identity.source == "llm" and context.source == "llm"
        return cls(
            user_id=user_id,
            identity=identity.text,
            context=context.text,
            generated_at=min(identity.generated_at, context.generated_at),
            source="llm" if both_llm else "offline",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "identity": self.identity,
            "context": self.context,
            "generated_at": self.generated_at.isoformat(),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Synopsis:
        """Inverse of :meth:`to_dict`.

        Raises:
            InvalidTypeError: ``data`` is not a mapping or a field has the wrong type.
        """
        if not isinstance(data, Mapping):
            raise InvalidTypeError("data", f"expected a dict, got {type(data).__name__}")
        for name in ("identity", "context"):
            if not isinstance(data.get(name), str):
                raise InvalidTypeError(name, f"expected str, got {data.get(name)!r}")
        source = data.get("source", "offline")
        if source not in get_args(Source):
            raise InvalidTypeError("source", f"{source!r} is not one of {get_args(Source)}")
        return cls(
            user_id=check_user_id(data.get("user_id")),
            identity=data["identity"],
            context=data["context"],
            generated_at=_parse_time(data.get("generated_at")),
            source=source,
        )


def _parse_time(value: object) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidTypeError("generated_at", f"{value!r} is not an ISO time") from exc
    else:
        raise InvalidTypeError("generated_at", f"expected an ISO time, got {value!r}")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _now() -> datetime:
    return datetime.now(timezone.utc)


# -- the cache -------------------------------------------------------------------------


class CacheGet(NamedTuple):
    """Read a key; when ``refresh_ttl`` is set, re-arm its expiry to that many seconds."""

    key: str
    refresh_ttl: float | None = None


class CacheSet(NamedTuple):
    """Write a key that expires after ``ttl`` seconds."""

    key: str
    value: str
    ttl: float


class CacheDelete(NamedTuple):
    """Delete a key; the result says whether it existed."""

    key: str


CacheOp = CacheGet | CacheSet | CacheDelete


def _positive_seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(name, f"expected seconds as a number, got {value!r}")
    if not value > 0 or value == float("inf"):
        raise InvalidSizeError(name, f"must be a positive number of seconds, got {value!r}")
    return float(value)


def _check_tier(tier: object) -> Tier:
    if tier not in TIERS:
        raise InvalidTypeError("tier", f"{tier!r} is not a tier", f"use one of {TIERS} or None")
    return tier


def _tiers(tier: Tier | None) -> tuple[Tier, ...]:
    return TIERS if tier is None else (_check_tier(tier),)


class SynopsisCache(ABC):
    """Two-tier synopsis cache; a backend implements ``batch``/``abatch`` and ``clear``/``aclear``.

    Args:
        identity_ttl: seconds an identity tier lives (default 604800, 7 days).
        context_ttl: seconds a context tier lives (default 3600, 1 hour).
        namespace: prefix of every key, so several applications can share one Redis.
    """

    def __init__(
        self,
        identity_ttl: float = DEFAULT_IDENTITY_TTL,
        context_ttl: float = DEFAULT_CONTEXT_TTL,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> None:
        if not isinstance(namespace, str) or not namespace or ":" in namespace:
            raise InvalidTypeError(
                "namespace", f"{namespace!r} is not a namespace", "use a non-empty str without ':'"
            )
        self.ttls: dict[Tier, float] = {
            "identity": _positive_seconds(identity_ttl, "identity_ttl"),
            "context": _positive_seconds(context_ttl, "context_ttl"),
        }
        self.namespace = namespace

    # -- the backend's core --------------------------------------------------------

    @abstractmethod
    def batch(self, ops: Sequence[CacheOp]) -> list[Any]:
        """Run ``ops`` in order; one result each (value or None, True, existed)."""

    @abstractmethod
    async def abatch(self, ops: Sequence[CacheOp]) -> list[Any]:
        """Async twin of :meth:`batch`."""

    @abstractmethod
    def clear(self) -> int:
        """Delete every key of this namespace (all users); returns how many."""

    @abstractmethod
    async def aclear(self) -> int:
        """Async twin of :meth:`clear`."""

    def close(self) -> None:  # noqa: B027 - optional hook; in process there is nothing to release
        """Release connections."""

    async def aclose(self) -> None:  # noqa: B027
        """Async twin of :meth:`close`."""

    # -- derived API ---------------------------------------------------------------

    def key(self, tier: Tier, user_id: str) -> str:
        """The key of one tier of one user: ``{namespace}:{tier}:{user_id}``."""
        return f"{self.namespace}:{_check_tier(tier)}:{check_user_id(user_id)}"

    def get(self, user_id: str, tier: Tier, *, refresh: bool = False) -> SynopsisTier | None:
        """One tier, or None when absent or expired; ``refresh`` re-arms its TTL."""
        return self.get_tiers(user_id, refresh=refresh, tiers=(tier,)).get(tier)

    async def aget(self, user_id: str, tier: Tier, *, refresh: bool = False) -> SynopsisTier | None:
        """Async twin of :meth:`get`."""
        return (await self.aget_tiers(user_id, refresh=refresh, tiers=(tier,))).get(tier)

    def get_tiers(
        self, user_id: str, *, refresh: bool = False, tiers: Sequence[Tier] = TIERS
    ) -> dict[Tier, SynopsisTier]:
        """The tiers present for the user (one round trip); ``refresh`` re-arms their TTLs."""
        ops = self._get_ops(user_id, refresh, tiers)
        return self._read(tiers, self.batch(ops))

    async def aget_tiers(
        self, user_id: str, *, refresh: bool = False, tiers: Sequence[Tier] = TIERS
    ) -> dict[Tier, SynopsisTier]:
        """Async twin of :meth:`get_tiers`."""
        ops = self._get_ops(user_id, refresh, tiers)
        return self._read(tiers, await self.abatch(ops))

    def set(self, user_id: str, tier: Tier, entry: SynopsisTier, ttl: float | None = None) -> None:
        """Store one tier for ``ttl`` seconds (default: the tier's TTL)."""
        self.set_tiers(user_id, {tier: entry}, ttl=ttl)

    async def aset(
        self, user_id: str, tier: Tier, entry: SynopsisTier, ttl: float | None = None
    ) -> None:
        """Async twin of :meth:`set`."""
        await self.aset_tiers(user_id, {tier: entry}, ttl=ttl)

    def set_tiers(
        self, user_id: str, entries: Mapping[Tier, SynopsisTier], ttl: float | None = None
    ) -> None:
        """Store several tiers at once; ``ttl`` overrides each tier's own TTL."""
        self.batch(self._set_ops(user_id, entries, ttl))

    async def aset_tiers(
        self, user_id: str, entries: Mapping[Tier, SynopsisTier], ttl: float | None = None
    ) -> None:
        """Async twin of :meth:`set_tiers`."""
        await self.abatch(self._set_ops(user_id, entries, ttl))

    def set_synopsis(self, synopsis: Synopsis) -> None:
        """Store both tiers of ``synopsis`` with their own TTLs (the seed's two ``cache.set``)."""
        self.set_tiers(synopsis.user_id, {t: synopsis.tier(t) for t in TIERS})

    async def aset_synopsis(self, synopsis: Synopsis) -> None:
        """Async twin of :meth:`set_synopsis`."""
        await self.aset_tiers(synopsis.user_id, {t: synopsis.tier(t) for t in TIERS})

    def invalidate(self, user_id: str, tier: Tier | None = None) -> int:
        """Drop one tier (or both); returns how many keys existed."""
        return sum(self.batch(self._delete_ops(user_id, tier)))

    async def ainvalidate(self, user_id: str, tier: Tier | None = None) -> int:
        """Async twin of :meth:`invalidate`."""
        return sum(await self.abatch(self._delete_ops(user_id, tier)))

    def clear_user(self, user_id: str) -> int:
        """Erase everything cached about the user (used by ``forget_user``)."""
        return self.invalidate(user_id)

    async def aclear_user(self, user_id: str) -> int:
        """Async twin of :meth:`clear_user`."""
        return await self.ainvalidate(user_id)

    def _get_ops(self, user_id: str, refresh: bool, tiers: Sequence[Tier]) -> list[CacheOp]:
        return [CacheGet(self.key(t, user_id), self.ttls[t] if refresh else None) for t in tiers]

    @staticmethod
    def _read(tiers: Sequence[Tier], values: list[Any]) -> dict[Tier, SynopsisTier]:
        out: dict[Tier, SynopsisTier] = {}
        for tier, raw in zip(tiers, values, strict=True):
            entry = SynopsisTier.from_json(raw) if isinstance(raw, str) else None
            if entry is not None:
                out[tier] = entry
        return out

    def _set_ops(
        self, user_id: str, entries: Mapping[Tier, SynopsisTier], ttl: float | None
    ) -> list[CacheOp]:
        override = None if ttl is None else _positive_seconds(ttl, "ttl")
        ops: list[CacheOp] = []
        for tier, entry in entries.items():
            if not isinstance(entry, SynopsisTier):
                raise InvalidTypeError(
                    f"entries[{tier!r}]", f"expected a SynopsisTier, got {type(entry).__name__}"
                )
            key = self.key(tier, user_id)
            ops.append(CacheSet(key, entry.to_json(), override or self.ttls[tier]))
        return ops

    def _delete_ops(self, user_id: str, tier: Tier | None) -> list[CacheOp]:
        return [CacheDelete(self.key(t, user_id)) for t in _tiers(tier)]


class InMemorySynopsisCache(SynopsisCache):
    """The in-process backend: a thread-safe dict with expiry times and an LRU bound.

    Args:
        clock: returns seconds (monotonic); inject a fake clock to test expiry.
        max_entries: keys kept at most; beyond it the least recently used are dropped
            (expired keys are dropped when read).
    """

    def __init__(
        self,
        identity_ttl: float = DEFAULT_IDENTITY_TTL,
        context_ttl: float = DEFAULT_CONTEXT_TTL,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 100_000,
    ) -> None:
        super().__init__(identity_ttl, context_ttl, namespace)
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 2:
            raise InvalidSizeError("max_entries", f"must be an int >= 2, got {max_entries!r}")
        self._clock = clock
        self._max_entries = max_entries
        self._data: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many unexpired keys are held."""
        with self._lock:
            now = self._clock()
            return sum(1 for _, expires in self._data.values() if expires > now)

    def batch(self, ops: Sequence[CacheOp]) -> list[Any]:
        with self._lock:
            now = self._clock()
            return [self._run(op, now) for op in ops]

    async def abatch(self, ops: Sequence[CacheOp]) -> list[Any]:
        return self.batch(ops)  # never blocks beyond a short lock

    def clear(self) -> int:
        with self._lock:
            now = self._clock()
            count = sum(1 for _, expires in self._data.values() if expires > now)
            self._data.clear()
            return count

    async def aclear(self) -> int:
        return self.clear()

    def _run(self, op: CacheOp, now: float) -> Any:
        if isinstance(op, CacheGet):
            held = self._data.get(op.key)
            if held is None or held[1] <= now:
                self._data.pop(op.key, None)
                return None
            if op.refresh_ttl is not None:
                self._data[op.key] = (held[0], now + op.refresh_ttl)
            self._data.move_to_end(op.key)
            return held[0]
        if isinstance(op, CacheSet):
            self._data[op.key] = (op.value, now + op.ttl)
            self._data.move_to_end(op.key)
            self._bound()
            return True
        held = self._data.pop(op.key, None)
        return held is not None and held[1] > now

    def _bound(self) -> None:
        while len(self._data) > self._max_entries:
            self._data.popitem(last=False)  # least recently used first


class RedisSynopsisCache(SynopsisCache):
    """The Redis backend: each tier a string key with a native TTL (``SET PX`` / ``GETEX PX``).

    One pipeline per call, so reading both tiers (and re-arming their TTLs) is one round
    trip. Sync calls use a thread-safe connection pool; async calls use ``redis.asyncio``
    with one client per event loop. Every Redis failure is raised as :class:`CacheError`.

    Args:
        url: ``redis://[:password@]host:port/db`` (``rediss://`` for TLS).
        timeout: seconds to connect and to wait for each answer.
        retries: retries on connection errors and timeouts (short backoff).
    """

    def __init__(
        self,
        url: str = DEFAULT_REDIS_URL,
        namespace: str = DEFAULT_NAMESPACE,
        identity_ttl: float = DEFAULT_IDENTITY_TTL,
        context_ttl: float = DEFAULT_CONTEXT_TTL,
        *,
        timeout: float = 2.0,
        retries: int = 1,
    ) -> None:
        super().__init__(identity_ttl, context_ttl, namespace)
        from tiermem.extras import needs_extra

        with needs_extra("redis", "memory.synopsis.backend", "'redis'"):
            import redis
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(
                "redis_url",
                f"{redact_url(str(url))!r} is not a Redis URL",
                "e.g. redis://127.0.0.1:6379/0",
            )
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InvalidSizeError("retries", f"must be an int >= 0, got {retries!r}")
        self.url = redact_url(url)
        self._raw_url = url
        self._retries = retries
        self._options: dict[str, Any] = {
            "socket_timeout": _positive_seconds(timeout, "timeout"),
            "socket_connect_timeout": timeout,
            "decode_responses": True,
        }
        self._client = self._connect(redis.Redis, redis.retry.Retry)
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._async_lock = threading.Lock()

    def _connect(self, client_class: Any, retry_class: Any) -> Any:
        """A client with a short backoff: a Redis outage fails in about ``timeout`` seconds."""
        from redis.backoff import ExponentialBackoff

        retry = retry_class(ExponentialBackoff(cap=0.2, base=0.02), self._retries)
        return client_class.from_url(self._raw_url, retry=retry, **self._options)

    def __repr__(self) -> str:
        return f"RedisSynopsisCache(url={self.url!r}, namespace={self.namespace!r})"

    def batch(self, ops: Sequence[CacheOp]) -> list[Any]:
        with self._translate_errors():
            pipe = self._client.pipeline(transaction=False)
            for op in ops:
                _queue(pipe, op)
            return _results(ops, pipe.execute())

    async def abatch(self, ops: Sequence[CacheOp]) -> list[Any]:
        with self._translate_errors():
            pipe = self._aclient().pipeline(transaction=False)
            for op in ops:
                _queue(pipe, op)
            return _results(ops, await pipe.execute())

    def clear(self) -> int:
        with self._translate_errors():
            deleted = 0
            batch: list[str] = []
            for key in self._client.scan_iter(match=self._pattern(), count=500):
                batch.append(key)
                if len(batch) >= 500:
                    deleted += self._client.unlink(*batch)
                    batch.clear()
            if batch:
                deleted += self._client.unlink(*batch)
            return deleted

    async def aclear(self) -> int:
        with self._translate_errors():
            client = self._aclient()
            keys = [key async for key in client.scan_iter(match=self._pattern(), count=500)]
            deleted = 0
            for start in range(0, len(keys), 500):
                deleted += await client.unlink(*keys[start : start + 500])
            return deleted

    def ping(self) -> None:
        """Check that Redis answers; raises :class:`CacheError` with the fix otherwise."""
        with self._translate_errors():
            self._client.ping()

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._async_lock:
            client = self._async_clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def _pattern(self) -> str:
        escaped = re.sub(r"([*?\[\]\\])", r"\\\1", self.namespace)
        return f"{escaped}:*"

    def _aclient(self) -> Any:
        """The ``redis.asyncio`` client of the running event loop (clients are per loop)."""
        import redis.asyncio
        import redis.asyncio.retry

        loop = asyncio.get_running_loop()
        with self._async_lock:
            client = self._async_clients.get(loop)
            if client is None:
                client = self._connect(redis.asyncio.Redis, redis.asyncio.retry.Retry)
                self._async_clients[loop] = client
            return client

    @contextlib.contextmanager
    def _translate_errors(self) -> Iterator[None]:
        import redis

        try:
            yield
        except (redis.RedisError, OSError) as exc:
            raise CacheError(
                f"Redis at {self.url} failed: {exc.__class__.__name__}: {str(exc).rstrip('.')}. "
                "Check that redis-server is running and reachable, fix "
                "memory.synopsis.redis_url, or set memory.synopsis.backend: memory."
            ) from exc


def _queue(pipe: Any, op: CacheOp) -> None:
    if isinstance(op, CacheGet):
        if op.refresh_ttl is None:
            pipe.get(op.key)
        else:
            pipe.getex(op.key, px=_millis(op.refresh_ttl))
    elif isinstance(op, CacheSet):
        pipe.set(op.key, op.value, px=_millis(op.ttl))
    else:
        pipe.delete(op.key)


def _results(ops: Sequence[CacheOp], raw: list[Any]) -> list[Any]:
    return [bool(r) if isinstance(op, CacheDelete) else r for op, r in zip(ops, raw, strict=True)]


def _millis(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, for messages and logs."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        netloc = f"{user}:***@{host}{port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<unparseable url>"


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


# -- the generator ---------------------------------------------------------------------

SYSTEM_PROMPT = "You write short, factual user profiles for an AI assistant's memory."

PROMPT = (
    "Create a user profile from these memories. Answer with exactly two sections:\n"
    "IDENTITY: who the user is - name, preferences, traits (stable facts).\n"
    "CONTEXT: what the user is doing now - recent topics, current goals.\n"
    "Use only what the memories say; write 'unknown' for a section with nothing to say. "
    "Keep each section under {max_words} words.\n\n"
    "Facts and preferences (most important first):\n{identity}\n\n"
    "Recent activity (newest first):\n{context}"
)
"""The generator's prompt; ``{identity}`` and ``{context}`` are lists of memories."""

_HEADER = re.compile(
    r"^[ \t>#*_\-]*(?:\d+[.)][ \t]*)?[*_]*[ \t]*(identity|context)[ \t]*[*_]*[ \t]*"
    r"(?::|-|–|—|$)[ \t*_]*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"^```[a-z]*\s*$", re.IGNORECASE | re.MULTILINE)
_NAME_STATEMENT = re.compile(r"\b(name is|named|called|i am [A-Z]|i'm [A-Z])", re.IGNORECASE)
_ITEM_CHARS = 300


class SynopsisGenerator:
    """Writes a :class:`Synopsis` from a user's memories.

    Offline (no LLM, or the LLM failed or answered without the two sections): the
    identity tier lists the user's facts and preferences by seed 001's importance score
    (statements of the user's name first); the context tier lists the newest context,
    summary and message memories. Deterministic for a given list of memories.

    Args:
        llm: an :class:`~tiermem.llm.LLM`, a model string such as ``"openai/gpt-4o-mini"``,
            or None for offline only.
        max_items: memories used per tier (in the prompt and offline).
        max_chars: longest text of one tier; longer text is cut at a word boundary.
        **options: passed to every LLM call (``temperature``, ``max_tokens``, ...).
    """

    def __init__(
        self,
        llm: LLM | str | None = None,
        *,
        max_items: int = 10,
        max_chars: int = 800,
        **options: Any,
    ) -> None:
        if isinstance(llm, str):
            llm = get_llm(llm)
        if llm is not None and not isinstance(llm, LLM):
            raise InvalidTypeError(
                "llm", f"{type(llm).__name__} is not an LLM", "pass get_llm('openai/gpt-4o-mini')"
            )
        for name, value, minimum in (("max_items", max_items, 1), ("max_chars", max_chars, 40)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InvalidSizeError(name, f"must be an int >= {minimum}, got {value!r}")
        self.llm = llm
        self.max_items = max_items
        self.max_chars = max_chars
        self.options = options

    def generate(self, user_id: str, memories: Sequence[MemoryRecord]) -> Synopsis:
        """The user's synopsis; never raises because of the LLM (falls back offline)."""
        user_id, records = self._inputs(user_id, memories)
        if self.llm is None or not records:
            return self.offline(user_id, records)
        try:
            answer = self.llm.complete(self.messages(records), **self.options).text
        except Exception as exc:  # any provider failure degrades to offline
            return self._fallback(user_id, records, _failure(exc))
        return self._from_answer(user_id, records, answer)

    async def agenerate(self, user_id: str, memories: Sequence[MemoryRecord]) -> Synopsis:
        """Async twin of :meth:`generate`."""
        user_id, records = self._inputs(user_id, memories)
        if self.llm is None or not records:
            return self.offline(user_id, records)
        try:
            answer = (await self.llm.acomplete(self.messages(records), **self.options)).text
        except Exception as exc:
            return self._fallback(user_id, records, _failure(exc))
        return self._from_answer(user_id, records, answer)

    def offline(self, user_id: str, memories: Sequence[MemoryRecord]) -> Synopsis:
        """The deterministic synopsis, without an LLM."""
        user_id, records = self._inputs(user_id, memories)
        identity, context = self.select(records)
        return Synopsis(
            user_id=user_id,
            identity=_grouped(identity, self.max_chars),
            context=_grouped(context, self.max_chars),
            generated_at=_now(),
            source="offline",
        )

    def select(
        self, memories: Sequence[MemoryRecord]
    ) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
        """The memories each tier uses: (identity, context), at most ``max_items`` each.

        Identity: facts and preferences, name statements first, then by
        :func:`~tiermem.stores.records.calculate_importance` measured at the newest memory's
        time. Context: context memories, then summaries, then messages, newest first.
        Duplicates (same text ignoring case and spacing) count once.
        """
        now = max((m.created_at for m in memories), default=_now())

        def identity_key(m: MemoryRecord) -> tuple[bool, float, float, str]:
            unnamed = _NAME_STATEMENT.search(m.content) is None
            score = calculate_importance(m, now=now)
            return (unnamed, -score, -m.created_at.timestamp(), m.content)

        def context_key(m: MemoryRecord) -> tuple[int, float, str]:
            return (CONTEXT_TYPES.index(m.memory_type), -m.created_at.timestamp(), m.content)

        identity = sorted(
            (m for m in memories if m.memory_type in IDENTITY_TYPES), key=identity_key
        )
        context = sorted((m for m in memories if m.memory_type in CONTEXT_TYPES), key=context_key)
        return _unique(identity, self.max_items), _unique(context, self.max_items)

    def messages(self, memories: Sequence[MemoryRecord]) -> list[dict[str, str]]:
        """The chat messages sent to the LLM (useful to inspect or log)."""
        identity, context = self.select(memories)
        prompt = PROMPT.format(
            max_words=max(20, self.max_chars // 6),
            identity=_bullets(identity),
            context=_bullets(context),
        )
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]

    def _inputs(
        self, user_id: str, memories: Sequence[MemoryRecord]
    ) -> tuple[str, list[MemoryRecord]]:
        """Validate; keep only the user's own records (another user's never leak in)."""
        user_id = check_user_id(user_id)
        if isinstance(memories, (str, bytes)) or not isinstance(memories, Sequence):
            raise InvalidTypeError(
                "memories", f"expected a list of MemoryRecord, got {type(memories).__name__}"
            )
        for i, memory in enumerate(memories):
            if not isinstance(memory, MemoryRecord):
                raise InvalidTypeError(
                    f"memories[{i}]", f"expected a MemoryRecord, got {type(memory).__name__}"
                )
        return user_id, [m for m in memories if m.user_id == user_id]

    def _from_answer(self, user_id: str, records: list[MemoryRecord], answer: str) -> Synopsis:
        sections = parse_sections(answer)
        if sections is None:
            why = f"the LLM answer ({len(answer)} characters) lacks IDENTITY or CONTEXT"
            return self._fallback(user_id, records, why)
        identity, context = sections
        return Synopsis(
            user_id=user_id,
            identity=self._bounded(identity),
            context=self._bounded(context),
            generated_at=_now(),
            source="llm",
        )

    def _fallback(self, user_id: str, records: list[MemoryRecord], why: str) -> Synopsis:
        log.warning("synopsis for a user falls back to offline: %s", why)
        return self.offline(user_id, records)

    def _bounded(self, text: str) -> str:
        return _cut(text.strip(), self.max_chars)


def _failure(exc: Exception) -> str:
    return f"the LLM call failed ({type(exc).__name__}: {str(exc)[:200]})"


def parse_sections(answer: str) -> tuple[str, str] | None:
    """``(identity, context)`` from an LLM answer, or None if either section is missing.

    Accepts ``IDENTITY: ...`` / ``## Identity`` / ``**Identity:**`` headers in any case and
    order, code fences, and a JSON object with ``identity`` and ``context`` strings.
    A section that says only "unknown" or "none" becomes empty.
    """
    if not isinstance(answer, str):
        return None
    text = _FENCE.sub("", answer).strip()
    found = _json_sections(text) or _header_sections(text)
    if found is None:
        return None
    identity, context = (_blank_unknown(s) for s in found)
    return None if not identity and not context else (identity, context)


def _json_sections(text: str) -> tuple[str, str] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    identity, context = lowered.get("identity"), lowered.get("context")
    if not isinstance(identity, str) or not isinstance(context, str):
        return None
    return identity, context


def _header_sections(text: str) -> tuple[str, str] | None:
    starts: dict[str, re.Match[str]] = {}
    for match in _HEADER.finditer(text):
        starts.setdefault(match.group(1).lower(), match)
    if set(starts) != set(TIERS):
        return None
    ordered = sorted(starts.items(), key=lambda item: item[1].start())
    bodies: dict[str, str] = {}
    for i, (name, match) in enumerate(ordered):
        end = ordered[i + 1][1].start() if i + 1 < len(ordered) else len(text)
        bodies[name] = (match.group(2) + text[match.end() : end]).strip()
    return bodies["identity"], bodies["context"]


def _blank_unknown(text: str) -> str:
    text = re.sub(r"\n{3,}", "\n\n", text.strip())
    return "" if text.strip(" .*_()[]").lower() in {"", "unknown", "none", "n/a"} else text


def _unique(memories: list[MemoryRecord], limit: int) -> list[MemoryRecord]:
    seen: set[str] = set()
    out = []
    for memory in memories:
        norm = " ".join(memory.content.lower().split()).strip(" .!")
        if norm and norm not in seen:
            seen.add(norm)
            out.append(memory)
        if len(out) == limit:
            break
    return out


def _clean(text: str, limit: int = _ITEM_CHARS) -> str:
    return _cut(" ".join(text.split()), limit)


def _bullets(memories: list[MemoryRecord]) -> str:
    if not memories:
        return "- (none)"
    return "\n".join(
        f"- [{m.memory_type}, {m.created_at.date().isoformat()}] {_clean(m.content)}"
        for m in memories
    )


_LABELS = {
    "fact": "Facts",
    "preference": "Preferences",
    "context": "Goals",
    "summary": "Recent topics",
    "message": "Recently said",
}


def _grouped(memories: list[MemoryRecord], limit: int) -> str:
    """One line per memory type, ``Label: item; item``, in first-appearance order.

    Items are taken in rank order while the text fits in ``limit`` characters; each
    item is cut to a quarter of the limit so one long memory cannot crowd out the rest.
    """
    groups: dict[str, list[str]] = {}
    text = ""
    for memory in memories:
        item = _clean(memory.content, max(40, limit // 4)).rstrip(" .;")
        groups.setdefault(memory.memory_type, []).append(item)
        candidate = _render_groups(groups)
        if len(candidate) > limit:
            groups[memory.memory_type].pop()
            break
        text = candidate
    return text


def _render_groups(groups: dict[str, list[str]]) -> str:
    return "\n".join(
        f"{_LABELS[kind]}: {'; '.join(items)}." for kind, items in groups.items() if items
    )


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;.") + "…"


# -- the service -----------------------------------------------------------------------


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


class SynopsisService:
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

    When the generator has an LLM but had to fall back offline, the identity tier is
    cached only for the context TTL, so the LLM's version replaces it soon.
    Concurrent misses for the same user generate once (per process).
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

    def get(
        self,
        user_id: str,
        fetch_memories: FetchMemories | None = None,
        *,
        generation: int | None = None,
    ) -> Synopsis:
        """The user's synopsis: cached tiers where present, the rest generated and cached.

        ``generation``: the user's change generation, read before the memories; a tier
        cached at another one is stale (the user's data changed since) and written again.
        """
        user_id = check_user_id(user_id)
        fetch = self._fetch(fetch_memories)
        cached = _current(self.cache.get_tiers(user_id, refresh=self.refresh_on_access), generation)
        if len(cached) == len(TIERS):
            return Synopsis.from_tiers(user_id, cached)
        with self._locks.get(user_id):
            cached = _current(self.cache.get_tiers(user_id), generation)  # filled meanwhile?
            if len(cached) == len(TIERS):
                return Synopsis.from_tiers(user_id, cached)
            fresh = self.generator.generate(user_id, _sync_fetch(fetch, user_id))
            return self._save(user_id, self._parts(cached, fresh, generation))

    async def aget(
        self,
        user_id: str,
        fetch_memories: AsyncFetchMemories | None = None,
        *,
        generation: int | None = None,
    ) -> Synopsis:
        """Async twin of :meth:`get`; ``fetch_memories`` may be a coroutine function."""
        user_id = check_user_id(user_id)
        fetch = self._fetch(fetch_memories)
        cached = _current(
            await self.cache.aget_tiers(user_id, refresh=self.refresh_on_access), generation
        )
        if len(cached) == len(TIERS):
            return Synopsis.from_tiers(user_id, cached)
        async with self._alocks.get(user_id):
            cached = _current(await self.cache.aget_tiers(user_id), generation)
            if len(cached) == len(TIERS):
                return Synopsis.from_tiers(user_id, cached)
            fresh = await self.generator.agenerate(user_id, await _async_fetch(fetch, user_id))
            return await self._asave(user_id, self._parts(cached, fresh, generation))

    def generate_synopsis(
        self,
        user_id: str,
        fetch_memories: FetchMemories | None = None,
        *,
        generation: int | None = None,
    ) -> Synopsis:
        """Seed 001's ``generate_synopsis``: regenerate from all memories and cache both tiers."""
        user_id = check_user_id(user_id)
        fresh = self.generator.generate(user_id, _sync_fetch(self._fetch(fetch_memories), user_id))
        return self._save(user_id, self._parts({}, fresh, generation))

    async def agenerate_synopsis(
        self, user_id: str, fetch_memories: AsyncFetchMemories | None = None
    ) -> Synopsis:
        """Async twin of :meth:`generate_synopsis`."""
        user_id = check_user_id(user_id)
        records = await _async_fetch(self._fetch(fetch_memories), user_id)
        fresh = await self.generator.agenerate(user_id, records)
        return await self._asave(user_id, self._parts({}, fresh))

    def invalidate(self, user_id: str, tier: Tier | None = None) -> int:
        """Drop the user's cached tiers (both by default); the next ``get`` regenerates."""
        return self.cache.invalidate(user_id, tier)

    async def ainvalidate(self, user_id: str, tier: Tier | None = None) -> int:
        """Async twin of :meth:`invalidate`."""
        return await self.cache.ainvalidate(user_id, tier)

    def memory_added(self, user_id: str, memory_type: str) -> int:
        """Invalidate what a new memory makes stale: a fact or preference the identity
        tier, a context memory the context tier; other types wait for the context TTL."""
        tier = stale_tier(memory_type)
        return 0 if tier is None else self.cache.invalidate(user_id, tier)

    async def amemory_added(self, user_id: str, memory_type: str) -> int:
        """Async twin of :meth:`memory_added`."""
        tier = stale_tier(memory_type)
        return 0 if tier is None else await self.cache.ainvalidate(user_id, tier)

    def _fetch(self, given: AsyncFetchMemories | None) -> AsyncFetchMemories:
        fetch = given if given is not None else self.fetch_memories
        if fetch is None or not callable(fetch):
            raise InvalidTypeError(
                "fetch_memories",
                f"expected a callable user_id -> memories, got {fetch!r}",
                "pass fetch_memories= to the call or to SynopsisService()",
            )
        return fetch

    def _save(self, user_id: str, parts: _Parts) -> Synopsis:
        self.cache.set_tiers(user_id, parts.missing, ttl=parts.ttl)
        return parts.synopsis(user_id)

    async def _asave(self, user_id: str, parts: _Parts) -> Synopsis:
        await self.cache.aset_tiers(user_id, parts.missing, ttl=parts.ttl)
        return parts.synopsis(user_id)

    def _parts(
        self, cached: dict[Tier, SynopsisTier], fresh: Synopsis, generation: int | None = None
    ) -> _Parts:
        fell_back = self.generator.llm is not None and fresh.source == "offline"
        missing = {
            t: replace(fresh.tier(t), generation=generation) for t in TIERS if t not in cached
        }
        return _Parts(cached, missing, self.cache.ttls["context"] if fell_back else None)


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


def _sync_fetch(fetch: AsyncFetchMemories, user_id: str) -> Sequence[MemoryRecord]:
    records = fetch(user_id)
    if inspect.isawaitable(records):
        if inspect.iscoroutine(records):
            records.close()  # never awaited: close it to avoid a warning
        raise InvalidTypeError(
            "fetch_memories", "is async; call aget/agenerate_synopsis or pass a sync function"
        )
    return records


async def _async_fetch(fetch: AsyncFetchMemories, user_id: str) -> Sequence[MemoryRecord]:
    records = fetch(user_id)
    if inspect.isawaitable(records):
        return await records
    return records


__all__ = [
    "TIERS",
    "CacheDelete",
    "CacheGet",
    "CacheSet",
    "InMemorySynopsisCache",
    "RedisSynopsisCache",
    "Synopsis",
    "SynopsisCache",
    "SynopsisGenerator",
    "SynopsisService",
    "SynopsisTier",
    "cache_from_config",
    "parse_sections",
    "redact_url",
    "stale_tier",
]
