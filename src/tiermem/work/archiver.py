"""The archiver: an in-process queue for writes that may wait.

:class:`Archiver` queues messages in process and writes them in batches from a
background :class:`~tiermem.runner.Runner`: to the in-process working memory when
retention keeps nothing in the store, and to the store's transcript under ``memory``
durability (bulk loads). A failed batch (embedder or database error) stays at the head
of the queue and is retried with backoff; ``flush()`` waits until everything submitted
is written; ``pending`` and ``failures`` make the state visible.

Durability: queued messages are in process memory until their batch is written,
normally within ``flush_interval`` seconds; a crash loses that queue (``pending`` of
them). The default write path does not use this queue: ``Memory.add`` commits to the
store before it returns.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.clock import Clock
from tiermem.errors import ClosedError
from tiermem.messages import Message, transcript_line
from tiermem.runner import Backoff, Runner
from tiermem.work.vectors import ContextVectors, embed_messages

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder
    from tiermem.stores.protocol import MemoryStore
    from tiermem.working.memory import WorkingMemory

log = logging.getLogger(__name__)

MAX_RETRY_WAIT = 30.0
"""Seconds at most between two tries of a batch that keeps failing."""


@dataclass(frozen=True)
class ArchivedMessage:
    """A message queued for the long-term store, with the owner it is written for."""

    user_id: str
    message: Message
    session_id: str | None
    agent_id: str | None
    previous_id: str | None = None


Sink = Callable[[list[ArchivedMessage], Any], None]
"""Writes an embedded batch: the items and their vectors (one row each)."""


def transcript_sink(store: MemoryStore) -> Sink:
    """A sink that appends each (user, session)'s messages to the store's transcript
    (``memory`` durability: the store's worker embeds them)."""

    def write(batch: list[ArchivedMessage], vectors: Any) -> None:
        groups: dict[tuple[str, str | None, str | None], list[ArchivedMessage]] = {}
        for item in batch:
            groups.setdefault((item.user_id, item.session_id, item.agent_id), []).append(item)
        for (user_id, session_id, agent_id), items in groups.items():
            store.transcript.append(
                user_id,
                session_id,
                [i.message for i in items],
                agent_id=agent_id,
                previous_id=items[0].previous_id,
            )

    return write


def working_sink(working: WorkingMemory) -> Sink:
    """A sink that adds messages to the in-process working memory."""

    def write(batch: list[ArchivedMessage], vectors: Any) -> None:
        for item, vector in zip(batch, vectors, strict=True):
            working.add_with_embedding(
                transcript_line(item.message),
                vector,
                {"message_id": item.message.message_id, "role": item.message.role},
                user_id=item.user_id,
                session_id=item.session_id,
                source="message",
                timestamp=item.message.timestamp,
            )

    return write


class Archiver:
    """Embeds queued messages in batches from a background thread and writes them.

    Args:
        sink: where embedded batches go (:func:`store_sink`, :func:`working_sink`).
        embedder: embeds each batch in one call (None: the sink gets no vectors).
        batch_size: messages per embed call and transaction.
        flush_interval: seconds a partial batch may wait before it is written.
        retry_backoff: first retry delay after a failure (doubles, up to
            :data:`MAX_RETRY_WAIT`).
        clock: where the waits take their time (a test's manual clock).
    """

    def __init__(
        self,
        sink: Sink,
        embedder: Embedder | None,
        *,
        batch_size: int = 64,
        flush_interval: float = 0.2,
        retry_backoff: float = 0.5,
        clock: Clock | None = None,
    ) -> None:
        self.sink = sink
        self.embedder = embedder
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.retry_backoff = retry_backoff
        self.failures = 0
        """Batches that failed (and were retried) since start."""
        self.last_error: BaseException | None = None
        self._queue: deque[ArchivedMessage] = deque()
        self._writing: list[ArchivedMessage] = []  # the batch being written
        self._cond = threading.Condition()
        self._closed = False
        self._runner = Runner(
            self._round,
            name="tiermem-archiver",
            clock=clock,
            gather=flush_interval,
            backoff=Backoff(retry_backoff, MAX_RETRY_WAIT),
            on_error=self._failed,
        )
        self.context = ContextVectors()

    @property
    def pending(self) -> int:
        """Messages submitted but not yet written."""
        with self._cond:
            return len(self._queue) + len(self._writing)

    def submit(self, items: Iterable[ArchivedMessage]) -> None:
        """Queue messages for the store; returns at once."""
        with self._cond:
            if self._closed:
                raise ClosedError("the archiver is closed")
            self._queue.extend(items)
            full = len(self._queue) >= self.batch_size
        self._runner.wake(now=full)  # a partial batch waits flush_interval for company

    def unwritten(self, user_id: str, session_id: str | None) -> set[str]:
        """Ids of the session's messages not yet written (queued or being written): the
        ones a search of the sink cannot find yet."""
        with self._cond:
            return {
                item.message.message_id
                for item in (*self._writing, *self._queue)
                if item.user_id == user_id and item.session_id == session_id
            }

    def discard_user(self, user_id: str) -> int:
        """Drop the queued messages of ``user_id`` (for erasure); returns how many."""
        with self._cond:
            kept = [i for i in self._queue if i.user_id != user_id]
            dropped = len(self._queue) - len(kept)
            self._queue = deque(kept)
            return dropped

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted message is written; False on timeout."""
        return self.pending == 0 or self._runner.flush(timeout)

    def close(self, timeout: float | None = 30.0) -> list[ArchivedMessage]:
        """Write what is queued (up to ``timeout``), stop the worker, and return what could
        not be written (empty unless the sink kept failing), oldest first."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
        self._runner.close(timeout)
        with self._cond:
            return list(self._queue)

    def _round(self) -> bool:
        """Write the oldest batch; a failed one goes back to the head of the queue (the
        runner retries it after its backoff). Whether more is queued."""
        with self._cond:
            if not self._queue:
                return False
            batch = [self._queue.popleft() for _ in range(min(self.batch_size, len(self._queue)))]
            self._writing = batch
        try:
            self._write(batch)
        except Exception:
            with self._cond:
                self._queue.extendleft(reversed(batch))
                self._writing = []
            raise
        with self._cond:
            self._writing = []
            return bool(self._queue)

    def _failed(self, exc: Exception, wait: float) -> None:
        self.failures += 1
        self.last_error = exc
        log.warning("archiving messages failed (%s); retrying in %.1fs", exc, wait)

    def _write(self, batch: list[ArchivedMessage]) -> None:
        if self.embedder is None:
            self.sink(batch, None)
            return
        own = embed_messages(self.embedder, [i.message for i in batch])
        keys = [(i.user_id, i.session_id, i.message.message_id, i.previous_id) for i in batch]
        self.sink(batch, self.context.mix(keys, own))
