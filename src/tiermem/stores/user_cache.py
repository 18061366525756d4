"""A per-user value trusted for some seconds, in a bounded table (the oldest dropped).

The PostgreSQL store keeps a few facts about a user that only steer a plan and are cheap
to read again (their row count, their common words): each is read at most once per
``ttl`` seconds, and a process serving a million users keeps ``most`` of them, not one
entry per user it ever saw.
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def bound(values: dict[K, V], most: int) -> None:
    """Drop ``values``' oldest entries (insertion order) beyond ``most``."""
    while len(values) > most:
        del values[next(iter(values))]


class UserCache(Generic[V]):
    """Values by user id, each trusted ``ttl`` seconds; beyond ``most`` users the one
    stored longest ago is dropped. Thread-safe."""

    def __init__(self, ttl: float, most: int) -> None:
        self.ttl = ttl
        self.most = most
        self._values: dict[str, tuple[V, float]] = {}
        self._lock = threading.Lock()

    def get(self, user_id: str) -> V | None:
        """``user_id``'s value unless it is missing or expired."""
        with self._lock:
            found = self._values.get(user_id)
        if found is None or found[1] <= time.monotonic():
            return None
        return found[0]

    def put(self, user_id: str, value: V) -> None:
        """Store ``user_id``'s value, trusted from now for ``ttl`` seconds."""
        expires = time.monotonic() + self.ttl
        with self._lock:
            self._values.pop(user_id, None)  # to the end: insertion order is age
            self._values[user_id] = (value, expires)
            bound(self._values, self.most)

    def forget(self, user_id: str) -> None:
        """Drop ``user_id``'s value (what it was read from changed)."""
        with self._lock:
            self._values.pop(user_id, None)
