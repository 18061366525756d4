"""The Redis synopsis cache: each tier a string key with a native TTL."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tiermem.aio.loops import PerLoop
from tiermem.errors import CacheError, ConfigError, InvalidSizeError
from tiermem.synopsis.cache import (
    DEFAULT_CONTEXT_TTL,
    DEFAULT_IDENTITY_TTL,
    DEFAULT_NAMESPACE,
    CacheDelete,
    CacheGet,
    CacheOp,
    CacheSet,
    SynopsisCache,
    positive_seconds,
)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


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
            "socket_timeout": positive_seconds(timeout, "timeout"),
            "socket_connect_timeout": timeout,
            "decode_responses": True,
        }
        self._client = self._connect(redis.Redis, redis.retry.Retry)
        self._async_clients: PerLoop[Any] = PerLoop()

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
        client = self._async_clients.pop()
        if client is not None:
            await client.aclose()

    def _pattern(self) -> str:
        escaped = re.sub(r"([*?\[\]\\])", r"\\\1", self.namespace)
        return f"{escaped}:*"

    def _aclient(self) -> Any:
        """The ``redis.asyncio`` client of the running event loop (clients are per loop)."""
        import redis.asyncio
        import redis.asyncio.retry

        return self._async_clients.get(
            lambda: self._connect(redis.asyncio.Redis, redis.asyncio.retry.Retry)
        )

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
