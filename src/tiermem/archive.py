"""The archive: writes conversation messages to searchable memory off the hot path.

``Memory.add`` hands each message to :class:`Archiver.submit`, which only enqueues. A
worker thread takes the queue in batches, embeds a batch with one model call and hands it
to its sink: the long-term store (one transaction per user) or, for non-persistent
retention, the in-process working memory. A failed batch (embedder or database error) stays at the
head of the queue and is retried with backoff: it is never dropped. ``flush()`` waits until
everything submitted is written; ``pending`` and ``failures`` make the state visible.

Durability: messages are in process memory until their batch is written, normally within
``flush_interval`` seconds; a crash loses at most that queue (``pending`` of them).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.messages import Message

if TYPE_CHECKING:
    import numpy as np

    from tiermem.embeddings.base import Embedder
    from tiermem.stores.base import MemoryStore, NewMemory
    from tiermem.working import WorkingMemory

log = logging.getLogger(__name__)

CONTEXT_WEIGHT = 0.5
"""Share of the previous message's vector added to a message's own."""
RECENT_VECTORS = 10_000
"""Own vectors kept in process to contextualize the messages that follow them."""


@dataclass(frozen=True)
class ArchivedMessage:
    """A message queued for the long-term store, with the owner it is written for."""

    user_id: str
    message: Message
    session_id: str | None
    agent_id: str | None
    previous_id: str | None = None


def transcript_line(message: Message) -> str:
    """The text stored and indexed for a message: ``"{speaker}: {text}"``.

    The speaker (its name, else its role) is part of the text so that keyword and vector
    search can match questions that name who said something.
    """
    return f"{speaker(message)}: {message.text}"


def speaker(message: Message) -> str:
    """Who said ``message``: its name, else ``metadata["speaker"]``, else its role."""
    return str(message.name or message.metadata.get("speaker") or message.role)


def to_new_memory(item: ArchivedMessage, embedding: Any) -> NewMemory:
    """The store row of an archived message (memory_type ``message`` or ``tool``)."""
    from tiermem.stores.base import NewMemory

    message = item.message
    metadata = {
        "message_id": message.message_id,
        "role": message.role,
        **{k: v for k, v in message.metadata.items() if _is_scalar(v)},
    }
    if message.name:
        metadata["name"] = message.name
    if item.previous_id:
        metadata["previous_id"] = item.previous_id
    return NewMemory(
        content=transcript_line(message),
        embedding=embedding,
        memory_type="tool" if message.role == "tool" else "message",
        agent_id=item.agent_id,
        session_id=item.session_id,
        importance=0.3,
        metadata=metadata,
        created_at=message.timestamp,
    )


def embed_messages(embedder: Embedder, messages: list[Message]) -> np.ndarray:
    """One vector per message: its whole line, plus its sentences when it has several.

    A long message often mixes topics, and one embedding of all of it matches none of
    them well. The vector of a multi-sentence message is the normalized sum of the whole
    line's vector and its sentences' vectors (scaled by 1/sqrt(n)), so a question about
    one sentence still finds the message. Measured on LoCoMo: evidence recall within
    2,000 tokens 0.831 -> 0.857 for vector + keyword ranking. One embed call per batch.
    """
    import numpy as np

    from tiermem.summarize import split_sentences

    texts = [transcript_line(m) for m in messages]
    parts: list[tuple[int, str]] = []
    for row, message in enumerate(messages):
        sentences = [s for s in split_sentences(message.text) if len(s.split()) >= 3]
        if len(sentences) > 1:
            parts.extend((row, f"{speaker(message)}: {s}") for s in sentences)
    vectors = embedder.embed(texts + [text for _, text in parts])
    result = np.array(vectors[: len(texts)], dtype=np.float32)
    if parts:
        rows = np.array([row for row, _ in parts])
        extra = vectors[len(texts) :]
        counts = np.bincount(rows, minlength=len(texts)).astype(np.float32)
        sums = np.zeros_like(result)
        np.add.at(sums, rows, extra)
        has = counts > 0
        result[has] += sums[has] / np.sqrt(counts[has])[:, None]
        result[has] /= np.linalg.norm(result[has], axis=1, keepdims=True)
    return result


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


Sink = Callable[[list[ArchivedMessage], Any], None]
"""Writes an embedded batch: the items and their vectors (one row each)."""


def store_sink(store: MemoryStore) -> Sink:
    """A sink that adds each user's messages to ``store`` in one transaction."""

    def write(batch: list[ArchivedMessage], vectors: Any) -> None:
        by_user: dict[str, list[NewMemory]] = {}
        for item, vector in zip(batch, vectors, strict=True):
            by_user.setdefault(item.user_id, []).append(to_new_memory(item, vector))
        for user_id, rows in by_user.items():
            store.add_many(user_id, rows)

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
        embedder: embeds each batch in one call.
        batch_size: messages per embed call and transaction.
        flush_interval: seconds a partial batch may wait before it is written.
        retry_backoff: first retry delay after a failure (doubles, up to 30 s).
    """

    def __init__(
        self,
        sink: Sink,
        embedder: Embedder,
        *,
        batch_size: int = 64,
        flush_interval: float = 0.2,
        retry_backoff: float = 0.5,
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
        self._flushing = 0  # callers waiting in flush(): partial batches go at once
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        # (user_id, session_id, message_id) -> own vector: never shared across users
        self._recent: OrderedDict[tuple[str, str | None, str], np.ndarray] = OrderedDict()

    @property
    def pending(self) -> int:
        """Messages submitted but not yet written."""
        with self._cond:
            return len(self._queue) + len(self._writing)

    def submit(self, items: Iterable[ArchivedMessage]) -> None:
        """Queue messages for the store; returns at once."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the archiver is closed")
            self._queue.extend(items)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tiermem-archiver", daemon=True
                )
                self._thread.start()
            if len(self._queue) >= self.batch_size:
                self._cond.notify_all()

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
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._queue or self._writing:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._cond.wait(0.05 if left is None else min(left, 0.05))
            finally:
                self._flushing -= 1
        return True

    def close(self, timeout: float | None = 30.0) -> list[ArchivedMessage]:
        """Write what is queued (up to ``timeout``), stop the worker, and return what could
        not be written (empty unless the sink kept failing), oldest first."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
        with self._cond:
            return list(self._queue)

    def _take(self) -> list[ArchivedMessage] | None:
        with self._cond:
            while not self._queue:
                if self._closed:
                    return None
                self._cond.wait()
            if len(self._queue) < self.batch_size and not (self._closed or self._flushing):
                self._cond.wait(self.flush_interval)
            if not self._queue:
                return [] if not self._closed else None
            batch = [self._queue.popleft() for _ in range(min(self.batch_size, len(self._queue)))]
            self._writing = batch
            return batch

    def _run(self) -> None:
        delay = self.retry_backoff
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue
            try:
                self._write(batch)
            except Exception as exc:  # keep the batch: it goes back to the head
                self.failures += 1
                self.last_error = exc
                log.warning(
                    "archiving %d messages failed (%s); retrying in %.1fs", len(batch), exc, delay
                )
                with self._cond:
                    self._queue.extendleft(reversed(batch))
                    self._writing = []
                    self._cond.notify_all()
                    if self._closed:
                        return
                    self._cond.wait(delay)
                delay = min(delay * 2, 30.0)
                continue
            delay = self.retry_backoff
            with self._cond:
                self._writing = []
                self._cond.notify_all()

    def _write(self, batch: list[ArchivedMessage]) -> None:
        own = embed_messages(self.embedder, [i.message for i in batch])
        self.sink(batch, self._in_context(batch, own))

    def _in_context(self, batch: list[ArchivedMessage], own: np.ndarray) -> np.ndarray:
        """Lean each message's vector toward the message before it in its session.

        A short reply ("Adoption agencies.") says little without the question it
        answers; adding ``CONTEXT_WEIGHT`` x the previous message's own vector lets a
        search for the topic find the answer. The previous vectors of the last
        ``RECENT_VECTORS`` messages are kept in process; a message whose predecessor was
        written by another process keeps its own vector. Measured on LoCoMo: evidence
        recall within 2,000 tokens 0.857 -> 0.877 for vector + keyword ranking.
        """
        import numpy as np

        out = np.array(own, dtype=np.float32)
        for row, item in enumerate(batch):
            user, session = item.user_id, item.session_id
            previous = self._recent.get((user, session, item.previous_id or ""))
            if previous is not None:
                mixed = own[row] + CONTEXT_WEIGHT * previous
                out[row] = mixed / np.linalg.norm(mixed)
            self._recent[(user, session, item.message.message_id)] = own[row]
            if len(self._recent) > RECENT_VECTORS:
                self._recent.popitem(last=False)
        return out
