"""Summarize evicted messages in batches, off the append path, without ever losing one.

A :class:`SummaryPipeline` is an eviction consumer of a buffer. It gathers evicted
messages into batches (seed 001: the oldest ``batch_size`` become one entry of the
``summaries`` ring, and the running ``summary`` absorbs them). Batches wait in a
queue and are summarized in order by a background task on a small shared thread
pool, so appending to the buffer never waits on an LLM. A pipeline is a job on that pool
(one at a time per buffer, ended when its queue is empty), not a loop with its own
thread, so it is not a :class:`~tiermem.runner.Runner`: many buffers share four threads.

A batch whose summarizer fails (provider error, timeout) stays pending: it is
visible in :attr:`SummaryPipeline.pending`, counted in :attr:`SummaryPipeline.stats`,
retried with exponential backoff, and after ``max_failures`` failures summarized
by the offline fallback (:class:`~tiermem.summaries.summarize.ExtractiveSummarizer`). While the
model's circuit breaker is open (it failed several times in a row:
:mod:`tiermem.breaker`) the summarizer raises
:class:`~tiermem.breaker.CircuitOpenError` at once and the batch goes to the fallback
straight away, with no retry and no wait; the probe after the cool-down brings the model
back. A read of a buffer's summary waits for the queued batches a short while
(:meth:`SummaryPipeline.settle`, ``read_wait`` seconds at most) only while the summarizer
is healthy: one that failed, or was too slow for the last read, is not waited for and
the summary is read as it stands. :meth:`SummaryPipeline.flush` waits for everything.
:meth:`SummaryPipeline.to_dict` includes pending batches so a restart loses nothing.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from tiermem.aio.twins import twin
from tiermem.breaker import CircuitBreaker, CircuitOpenError
from tiermem.clock import SYSTEM_CLOCK, Clock
from tiermem.errors import InvalidSizeError, InvalidTypeError, SerializationError
from tiermem.messages import Message, messages_from_dicts
from tiermem.runner import backoff_delay, shared_pool
from tiermem.summaries.summarize import ExtractiveSummarizer, Summarizer

log = logging.getLogger(__name__)

WORKER_THREADS = 4
"""Threads shared by every pipeline of the process (one batch per pipeline at a time)."""


@dataclass(frozen=True)
class SummaryPolicy:
    """How a buffer summarizes what it evicts.

    Args:
        batch_size: evicted messages per batch (one ``summaries`` entry each).
        mode: ``"background"`` (appends never wait) or ``"sync"`` (summarize inside the
            append that completes a batch; for scripts and tests).
        max_failures: failed attempts after which the fallback summarizes the batch.
        retry_backoff: seconds before the first retry; doubles per failure.
        max_backoff: upper bound of one retry wait.
        max_pending: queued batches beyond which the backlog is summarized by the
            fallback, so a slow or dead LLM cannot grow the queue without bound.
        fallback: the offline summarizer; default ``ExtractiveSummarizer()``.
        read_wait: seconds a read of the summary waits at most for the queued batches
            while the summarizer is healthy (:meth:`SummaryPipeline.settle`; 0: never).
    """

    batch_size: int = 10
    mode: Literal["background", "sync"] = "background"
    max_failures: int = 3
    retry_backoff: float = 1.0
    max_backoff: float = 60.0
    max_pending: int = 100
    fallback: Summarizer | None = None
    read_wait: float = 2.0

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_failures", "max_pending"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSizeError(name, f"must be an int >= 1, got {value!r}")
        for name in ("retry_backoff", "max_backoff", "read_wait"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise InvalidSizeError(name, f"must be a number >= 0, got {value!r}")
        if self.mode not in ("background", "sync"):
            raise InvalidSizeError("mode", f"{self.mode!r} is not 'background' or 'sync'")
        if self.fallback is not None and not isinstance(self.fallback, Summarizer):
            raise InvalidTypeError("fallback", "expected a Summarizer (summarize/asummarize)")


@dataclass
class PendingBatch:
    """Evicted messages waiting to be summarized, with their failure record."""

    messages: list[Message]
    failures: int = 0
    last_error: str | None = None
    entry: str | None = field(default=None, repr=False)
    """The batch's own summary, once computed (kept across retries of the merge)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": [m.to_dict() for m in self.messages],
            "failures": self.failures,
            "last_error": self.last_error,
        }


@dataclass
class SummaryStats:
    """Counters of one pipeline since it was created."""

    batches: int = 0
    """Batches summarized and applied."""
    messages: int = 0
    """Messages in those batches."""
    failures: int = 0
    """Failed summarization attempts (each is retried or falls back)."""
    fallbacks: int = 0
    """Batches the fallback summarized: after ``max_failures`` failures, an overload, or
    while the model's circuit breaker was open."""


Apply = Callable[[str, str], None]
"""Receives ``(entry, running_summary)`` for each summarized batch, in order."""


class SummaryPipeline:
    """Batches evicted messages and summarizes them in order, in the background.

    Args:
        summarizer: the primary summarizer (an LLM summarizer, usually).
        apply: called with ``(batch summary, new running summary)`` per batch, in order.
        current: returns the running summary the next batch is merged into.
        policy: batching, mode, retries and fallback (:class:`SummaryPolicy`).
        clock: where retry waits take their time (a test's manual clock).
    """

    def __init__(
        self,
        summarizer: Summarizer,
        apply: Apply,
        current: Callable[[], str | None],
        policy: SummaryPolicy | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(summarizer, Summarizer):
            raise InvalidTypeError(
                "summarizer",
                f"{type(summarizer).__name__} lacks summarize()/asummarize()",
                "use MemorySummarizer(model=...) or ExtractiveSummarizer()",
            )
        self.summarizer = summarizer
        self.policy = policy or SummaryPolicy()
        self.fallback: Summarizer = self.policy.fallback or ExtractiveSummarizer()
        self.stats = SummaryStats()
        self._apply = apply
        self._current = current
        self._partial: list[Message] = []
        self._queue: deque[PendingBatch] = deque()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = False
        self._slow = False  # a read waited read_wait in vain; no read waits until a batch lands
        self._closed = threading.Event()
        self.clock = clock or SYSTEM_CLOCK

    # -- intake (the eviction consumer) -------------------------------------------------

    def __call__(self, messages: list[Message]) -> None:
        """Take evicted messages (oldest first); quick unless the mode is ``sync``."""
        with self._queueing():
            self._partial.extend(messages)
            size = self.policy.batch_size
            while len(self._partial) >= size:
                self._queue.append(PendingBatch(self._partial[:size]))
                self._partial = self._partial[size:]

    @contextmanager
    def _queueing(self) -> Iterator[None]:
        """Hold the lock while the caller queues work; then start a drain unless one runs."""
        with self._lock:
            yield
            start = bool(self._queue) and not self._running
            if start:
                self._running = True
        if start:
            self._launch()

    def _launch(self) -> None:
        if self.policy.mode == "sync":
            self._drain()
        else:
            shared_pool("summarize", WORKER_THREADS).submit(self._drain)

    # -- inspection ----------------------------------------------------------------------

    @property
    def pending(self) -> list[PendingBatch]:
        """Batches not yet summarized, oldest first (the one in progress included)."""
        with self._lock:
            return list(self._queue)

    @property
    def pending_messages(self) -> int:
        """Evicted messages not yet in the summary (queued batches and the partial one)."""
        with self._lock:
            return sum(len(b.messages) for b in self._queue) + len(self._partial)

    # -- waiting -------------------------------------------------------------------------

    def flush(self, timeout: float | None = None, include_partial: bool = True) -> bool:
        """Wait until every queued batch is summarized; True if done within ``timeout``.

        With ``include_partial`` the messages of an incomplete batch form a batch first,
        so everything evicted so far ends up in the summary.
        """
        with self._queueing():
            if include_partial and self._partial:
                self._queue.append(PendingBatch(self._partial))
                self._partial = []
        with self._idle:
            return self._idle.wait_for(lambda: not self._queue and not self._running, timeout)

    def settle(self) -> bool:
        """Let a read see the queued batches in the summary: wait for them, at most
        ``policy.read_wait`` seconds, while the summarizer is healthy (no batch has failed,
        its circuit breaker counts no failure, the last such wait was not in vain); at
        once otherwise. True when nothing queued is left (the partial batch aside)."""

        def settled() -> bool:
            return not self._queue or bool(self._queue[0].failures) or not _healthy(self)

        with self._idle:
            if settled() or self._slow:
                return not self._queue
            if not self._idle.wait_for(settled, self.policy.read_wait):
                self._slow = True
            return not self._queue

    aflush = twin(flush)

    def clear(self) -> None:
        """Forget pending work (the buffer was cleared); a batch in progress still applies."""
        with self._lock:
            self._partial = []
            running = self._queue[0] if self._running and self._queue else None
            self._queue = deque([running] if running else [])

    def close(self) -> None:
        """Stop retry waits early (pending batches stay pending, for :meth:`to_dict`)."""
        with self._idle:
            self._closed.set()
            self._idle.notify_all()

    # -- persistence ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Pending batches and the partial batch, JSON-compatible."""
        with self._lock:
            return {
                "batches": [b.to_dict() for b in self._queue],
                "partial": [m.to_dict() for m in self._partial],
            }

    def restore(self, data: Mapping[str, Any]) -> None:
        """Queue the batches of :meth:`to_dict` (after a restart) and start on them.

        Raises:
            SerializationError: ``data`` is not what :meth:`to_dict` writes.
        """
        batches, partial = _read_state(data)
        with self._queueing():
            self._queue.extend(batches)
            self._partial = partial + self._partial

    # -- the worker ----------------------------------------------------------------------

    def _drain(self) -> None:
        """Summarize queued batches in order until the queue is empty."""
        while True:
            with self._lock:
                if not self._queue or self._closed.is_set():
                    self._running = False
                    self._idle.notify_all()
                    return
                batch = self._queue[0]
                overloaded = len(self._queue) > self.policy.max_pending
            use_fallback = overloaded or batch.failures >= self.policy.max_failures
            summarizer = self.fallback if use_fallback else self.summarizer
            try:
                try:
                    entry, running = self._summarize(summarizer, batch)
                except CircuitOpenError as exc:
                    if use_fallback:
                        raise
                    log.debug("summarizer skipped (%s); the fallback summarizes the batch", exc)
                    summarizer, use_fallback = self.fallback, True
                    entry, running = self._summarize(summarizer, batch)
            except Exception as exc:
                self._failed(batch, summarizer, exc)
                continue
            # applied before the batch leaves the queue: a read that finds the queue
            # without it (SummaryPipeline.settle) finds the summary with it
            self._apply(entry, running)
            with self._lock:
                self._queue.popleft()
                self._slow = False
                self.stats.batches += 1
                self.stats.messages += len(batch.messages)
                self.stats.fallbacks += use_fallback

    def _summarize(self, summarizer: Summarizer, batch: PendingBatch) -> tuple[str, str]:
        previous = self._current()
        if batch.entry is None:
            batch.entry = summarizer.summarize(batch.messages)
        if not previous:
            return batch.entry, batch.entry
        return batch.entry, summarizer.summarize(batch.messages, previous_summary=previous)

    def _failed(self, batch: PendingBatch, summarizer: Summarizer, exc: Exception) -> None:
        with self._lock:
            batch.failures += 1
            batch.last_error = f"{type(exc).__name__}: {exc}"
            self.stats.failures += 1
            failures = batch.failures
        log.warning(
            "summarizer %s failed on a batch of %d messages (attempt %d): %s",
            type(summarizer).__name__,
            len(batch.messages),
            failures,
            batch.last_error,
        )
        if summarizer is self.summarizer and failures >= self.policy.max_failures:
            return  # next attempt uses the fallback at once
        delay = backoff_delay(self.policy.retry_backoff, failures - 1, self.policy.max_backoff)
        with self._idle:
            self._idle.notify_all()  # a read waiting in settle() stops waiting
            self.clock.wait_for(self._idle, self._closed.is_set, delay)


def _healthy(pipeline: SummaryPipeline) -> bool:
    """Whether a read may wait for ``pipeline``'s summarizer: it has no circuit breaker,
    or its breaker counts no failure."""
    breaker = getattr(pipeline.summarizer, "breaker", None)
    return not isinstance(breaker, CircuitBreaker) or breaker.failed == 0


def _read_state(data: Mapping[str, Any]) -> tuple[list[PendingBatch], list[Message]]:
    if not isinstance(data, Mapping):
        raise SerializationError("pending_summaries", "expected a dict with batches and partial")
    raw_batches = data.get("batches", [])
    raw_partial = data.get("partial", [])
    if not isinstance(raw_batches, list) or not isinstance(raw_partial, list):
        raise SerializationError("pending_summaries", "batches and partial must be lists")
    batches = []
    for i, raw in enumerate(raw_batches):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("messages"), list):
            raise SerializationError(
                f"pending_summaries.batches[{i}]", "expected {messages: [...]}"
            )
        failures = raw.get("failures", 0)
        batches.append(
            PendingBatch(
                messages_from_dicts(raw["messages"], f"pending_summaries.batches[{i}]"),
                failures if isinstance(failures, int) else 0,
                raw.get("last_error"),
            )
        )
    return batches, messages_from_dicts(raw_partial, "pending_summaries.partial")
