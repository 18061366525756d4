"""The synopsis cache: each tier under its own key with its own TTL.

A backend implements one pair, :meth:`SynopsisCache.batch` / ``abatch``, over three small
operations (:class:`CacheGet`, :class:`CacheSet`, :class:`CacheDelete`), plus ``clear``;
every other method is derived. :class:`InMemorySynopsisCache` is the in-process backend.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.types.checks import check_user_id
from tiermem.types.synopsis import TIERS, Synopsis, SynopsisTier, Tier

DEFAULT_IDENTITY_TTL = 604_800  # 7 days, as in seed 001
DEFAULT_CONTEXT_TTL = 3_600  # 1 hour
DEFAULT_NAMESPACE = "tiermem"


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


def positive_seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(name, f"expected seconds as a number, got {value!r}")
    if not value > 0 or value == float("inf"):
        raise InvalidSizeError(name, f"must be a positive number of seconds, got {value!r}")
    return float(value)


def check_tier(tier: object) -> Tier:
    if tier not in TIERS:
        raise InvalidTypeError("tier", f"{tier!r} is not a tier", f"use one of {TIERS} or None")
    return tier


def _tiers(tier: Tier | None) -> tuple[Tier, ...]:
    return TIERS if tier is None else (check_tier(tier),)


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
            "identity": positive_seconds(identity_ttl, "identity_ttl"),
            "context": positive_seconds(context_ttl, "context_ttl"),
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
        return f"{self.namespace}:{check_tier(tier)}:{check_user_id(user_id)}"

    @stepped
    def get(self, user_id: str, tier: Tier, *, refresh: bool = False) -> Steps[SynopsisTier | None]:
        """One tier, or None when absent or expired; ``refresh`` re-arms its TTL."""
        tiers = (tier,)
        return self._read(tiers, (yield self._get_ops(user_id, refresh, tiers))).get(tier)

    aget = stepped_twin(get)

    @stepped
    def get_tiers(
        self, user_id: str, *, refresh: bool = False, tiers: Sequence[Tier] = TIERS
    ) -> Steps[dict[Tier, SynopsisTier]]:
        """The tiers present for the user (one round trip); ``refresh`` re-arms their TTLs."""
        return self._read(tiers, (yield self._get_ops(user_id, refresh, tiers)))

    aget_tiers = stepped_twin(get_tiers)

    @stepped
    def set(
        self, user_id: str, tier: Tier, entry: SynopsisTier, ttl: float | None = None
    ) -> Steps[None]:
        """Store one tier for ``ttl`` seconds (default: the tier's TTL)."""
        yield self._set_ops(user_id, {tier: entry}, ttl)

    aset = stepped_twin(set)

    @stepped
    def set_tiers(
        self, user_id: str, entries: Mapping[Tier, SynopsisTier], ttl: float | None = None
    ) -> Steps[None]:
        """Store several tiers at once; ``ttl`` overrides each tier's own TTL."""
        yield self._set_ops(user_id, entries, ttl)

    aset_tiers = stepped_twin(set_tiers)

    @stepped
    def set_synopsis(self, synopsis: Synopsis) -> Steps[None]:
        """Store both tiers of ``synopsis`` with their own TTLs (the seed's two ``cache.set``)."""
        yield self._set_ops(synopsis.user_id, {t: synopsis.tier(t) for t in TIERS}, None)

    aset_synopsis = stepped_twin(set_synopsis)

    @stepped
    def invalidate(self, user_id: str, tier: Tier | None = None) -> Steps[int]:
        """Drop one tier (or both); returns how many keys existed."""
        return sum((yield self._delete_ops(user_id, tier)))

    ainvalidate = stepped_twin(invalidate)

    @stepped
    def clear_user(self, user_id: str) -> Steps[int]:
        """Erase everything cached about the user (used by ``forget_user``)."""
        return sum((yield self._delete_ops(user_id, None)))

    aclear_user = stepped_twin(clear_user)

    def _step(self, ops: list[CacheOp], /) -> list[Any]:
        """Run the ops of a derived method (its one wait) in one :meth:`batch`."""
        return self.batch(ops)

    async def _astep(self, ops: list[CacheOp], /) -> list[Any]:
        return await self.abatch(ops)

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
        override = None if ttl is None else positive_seconds(ttl, "ttl")
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

    abatch = stepped_twin(batch)  # never blocks beyond a short lock

    def clear(self) -> int:
        with self._lock:
            now = self._clock()
            count = sum(1 for _, expires in self._data.values() if expires > now)
            self._data.clear()
            return count

    aclear = stepped_twin(clear)

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
