"""A small thread-safe LRU cache for embedding vectors (seed 001: ``LRUCache(1000)``)."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from tiermem.errors import InvalidSizeError, InvalidTypeError

V = TypeVar("V")


def content_hash(text: str) -> str:
    """Return the SHA-256 hex digest of ``text``: the cache and dedup key of a content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class LRUCache(Generic[V]):
    """Keeps at most ``maxsize`` entries, dropping the least recently used first.

    Every method takes one lock, so the cache can be shared by threads and by
    coroutines running embedders in worker threads.
    """

    def __init__(self, maxsize: int = 1000) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int):
            raise InvalidTypeError("maxsize", f"expected an int, got {type(maxsize).__name__}")
        if maxsize < 0:
            raise InvalidSizeError("maxsize", f"must be >= 0, got {maxsize}", "0 disables caching")
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> V | None:
        """Return the value for ``key`` (marking it recently used), or None."""
        with self._lock:
            try:
                value = self._data[key]
            except KeyError:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: V) -> None:
        """Store ``value`` under ``key``, evicting the least recently used entries."""
        if self.maxsize == 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry and reset the hit counters."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data
