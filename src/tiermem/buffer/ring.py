"""The ring both buffers are built on: a windowed FIFO by count and/or tokens.

Append is O(1); every item that leaves the window is handed, in order, to the registered
eviction consumers, so nothing leaves unseen. Eviction never separates an assistant tool
call from its results, and never keeps a tool result whose call has left. Sync methods
are safe under threads; the ``async_*`` methods also take an asyncio lock. Eviction
consumers run under the ring's lock, in eviction order: they must be quick.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, Generic, TypeVar

from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.messages import Message
from tiermem.tokens import TokenCounter, get_token_counter

log = logging.getLogger(__name__)

EvictionConsumer = Callable[[list[Message]], None]
"""Receives messages that left a buffer, oldest first."""

T = TypeVar("T")


def check_size(name: str, value: Any, *, allow_zero: bool = False) -> int | None:
    """``value`` if it is a size (an int >= 1, or >= 0 with ``allow_zero``) or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, f"expected an int or None, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        floor = "0" if allow_zero else "1"
        raise InvalidSizeError(name, f"must be >= {floor}, got {value}", "or None for no limit")
    return value


class RingBuffer(Generic[T]):
    """The windowed FIFO both buffers are built on.

    Subclasses say how to read an item: its tool-call ids, the call it answers, and
    the :class:`Message` consumers receive.
    """

    def __init__(
        self,
        max_items: int | None,
        max_tokens: int | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self._max_items = max_items
        self._max_tokens = check_size("max_tokens", max_tokens)
        counts = callable(getattr(token_counter, "count_message", None))
        if token_counter is not None and not counts:
            raise InvalidTypeError(
                "token_counter",
                f"expected a TokenCounter, got {type(token_counter).__name__}",
                "pass tiermem.tokens.get_token_counter(...) or None",
            )
        self._counter = token_counter
        self._items: deque[T] = deque()
        self._costs: deque[int] = deque()
        self._tokens = 0
        self._open_calls: dict[str, int] = {}
        self._consumers: list[EvictionConsumer] = []
        self._lock = threading.RLock()
        self._alock: asyncio.Lock | None = None
        self.evicted_count = 0
        """Messages that have left the window since creation."""

    # -- item reading (overridden) ----------------------------------------------------

    @staticmethod
    def _call_ids(item: T) -> list[str] | None:
        raise NotImplementedError

    @staticmethod
    def _answers(item: T) -> str | None:
        raise NotImplementedError

    @staticmethod
    def _as_message(item: T) -> Message:
        raise NotImplementedError

    # -- window ---------------------------------------------------------------------

    @property
    def token_counter(self) -> TokenCounter:
        """The counter used for the token window and token totals."""
        if self._counter is None:
            self._counter = get_token_counter()
        return self._counter

    @property
    def tokens(self) -> int:
        """Tokens of the messages in the window (OpenAI chat counting)."""
        with self._lock:
            if self._max_tokens is not None:
                return self._tokens
            counter = self.token_counter
            return sum(counter.count_message(self._as_message(i)) for i in self._items)

    def add_eviction_consumer(self, consumer: EvictionConsumer) -> None:
        """Register ``consumer`` to receive every message that leaves the window, in order."""
        if not callable(consumer):
            raise InvalidTypeError("consumer", "expected a callable taking a list of messages")
        with self._lock:
            self._consumers.append(consumer)

    def remove_eviction_consumer(self, consumer: EvictionConsumer) -> None:
        """Stop sending evictions to ``consumer``."""
        with self._lock:
            self._consumers.remove(consumer)

    def _push_all(self, items: Iterable[T]) -> None:
        with self._lock:
            for item in items:
                self._push(item)
            self._evict()

    def _append(self, item: T, plain: bool) -> None:
        """Append one item; ``plain`` says it neither calls a tool nor answers one.

        The hot path (a plain item, a count-only window, no tool call in the window)
        costs a deque append, a length check and at most one popleft.
        """
        with self._lock:
            if plain and self._max_tokens is None and not self._open_calls:
                items = self._items
                items.append(item)
                if self._max_items is not None and len(items) > self._max_items:
                    evicted = items.popleft()
                    self.evicted_count += 1
                    if self._consumers:
                        self._notify([evicted])
                return
            self._push(item)
            self._evict()

    def _push(self, item: T) -> None:
        answers = self._answers(item)
        if answers is not None and answers not in self._open_calls:
            self._deliver([item])  # its call already left: never keep an orphan result
            return
        self._items.append(item)
        if self._max_tokens is not None:
            cost = self.token_counter.count_message(self._as_message(item))
            self._costs.append(cost)
            self._tokens += cost
        ids = self._call_ids(item)
        if ids:
            for call_id in ids:
                self._open_calls[call_id] = self._open_calls.get(call_id, 0) + 1

    def _over(self) -> bool:
        if self._max_items is not None and len(self._items) > self._max_items:
            return True
        return self._max_tokens is not None and self._tokens > self._max_tokens

    def _evict(self) -> None:
        evicted: list[T] = []
        while self._items and self._over():
            evicted.extend(self._pop_group())
        self._deliver(evicted)

    def _pop_left(self) -> T:
        item = self._items.popleft()
        if self._max_tokens is not None:
            self._tokens -= self._costs.popleft()
        return item

    def _pop_group(self) -> list[T]:
        """Pop the oldest item, and with a tool call, every result that answers it."""
        item = self._pop_left()
        ids = self._call_ids(item)
        if not ids:
            return [item]
        group = [item]
        pending = set(ids)
        for call_id in ids:
            left = self._open_calls.pop(call_id, 1) - 1
            if left > 0:
                self._open_calls[call_id] = left
        while self._items and self._answers(self._items[0]) in pending:
            group.append(self._pop_left())
        stray = [i for i in self._items if self._answers(i) in pending]
        if stray:  # results not right after their call: rare, remove them too
            self._remove(stray)
            group.extend(stray)
        return group

    def _remove(self, items: list[T]) -> None:
        drop = {id(i) for i in items}
        if self._max_tokens is None:
            self._items = deque(i for i in self._items if id(i) not in drop)
            return
        kept = [(i, c) for i, c in zip(self._items, self._costs, strict=True) if id(i) not in drop]
        self._items = deque(i for i, _ in kept)
        self._costs = deque(c for _, c in kept)
        self._tokens = sum(self._costs)

    def _deliver(self, items: list[T]) -> None:
        if items:
            self.evicted_count += len(items)
            if self._consumers:
                self._notify(items)

    def _notify(self, items: list[T]) -> None:
        messages = [self._as_message(i) for i in items]
        for consumer in self._consumers:
            try:
                consumer(messages)
            except Exception:
                log.exception("eviction consumer %r failed on %d messages", consumer, len(items))

    def drain(self) -> int:
        """Evict every message to the consumers (oldest first); returns how many left."""
        with self._lock:
            items = list(self._items)
            self._reset()
            self._deliver(items)
            return len(items)

    def _reset(self) -> None:
        self._items.clear()
        self._costs.clear()
        self._tokens = 0
        self._open_calls.clear()

    def _snapshot(self) -> list[T]:
        with self._lock:
            return list(self._items)

    def _recent(self, n: int) -> list[T]:
        if isinstance(n, bool) or not isinstance(n, int):
            raise InvalidTypeError("n", f"expected an int, got {type(n).__name__}")
        if n < 0:
            raise InvalidSizeError("n", f"must be >= 0, got {n}", "ask for 0 or more messages")
        if n == 0:
            return []
        with self._lock:
            recent = list(islice(reversed(self._items), n))
        recent.reverse()
        return recent

    def _async_lock(self) -> asyncio.Lock:
        if self._alock is None:
            with self._lock:
                if self._alock is None:
                    self._alock = asyncio.Lock()
        return self._alock

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._snapshot())
