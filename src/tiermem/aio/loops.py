"""One object per running event loop: an HTTP connection pool or a Redis client is bound
to the loop that made it and cannot serve another (a process may run several loops, one
per thread, or one per ``asyncio.run``)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """The object of each running event loop, made on first use; the object of a loop that
    was closed or collected is dropped."""

    def __init__(self) -> None:
        self._items: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self, make: Callable[[], T]) -> T:
        """The running loop's object (``make()`` on first use, under the lock)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for old in [lp for lp in self._items if lp.is_closed()]:
                del self._items[old]
            item = self._items.get(loop)
            if item is None:
                item = self._items[loop] = make()
            return item

    def pop(self) -> T | None:
        """The running loop's object, no longer kept (the caller closes it); None if none."""
        loop = asyncio.get_running_loop()
        with self._lock:
            return self._items.pop(loop, None)
