"""The archive: message vectors, and the in-process queue for writes that may wait.

:func:`embed_messages` and :class:`ContextVectors` make the vector of each message (the
store's worker and the archiver share them). :class:`Archiver` queues messages in
process and writes them in batches from a background thread: to the in-process working
memory when retention keeps nothing in the store, and to the store's transcript under
``memory`` durability (bulk loads). A failed batch (embedder or database error) stays at
the head of the queue and is retried with backoff; ``flush()`` waits until everything
submitted is written; ``pending`` and ``failures`` make the state visible.

Durability: queued messages are in process memory until their batch is written,
normally within ``flush_interval`` seconds; a crash loses that queue (``pending`` of
them). The default write path does not use this queue: ``Memory.add`` commits to the
store before it returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.errors import ClosedError
from tiermem.messages import Message, speaker, transcript_line

if TYPE_CHECKING:
    import numpy as np

    from tiermem.embeddings.base import Embedder
    from tiermem.stores.protocol import MemoryStore
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


def embed_messages(embedder: Embedder, messages: list[Message]) -> np.ndarray:
    """One vector per message: its whole line, plus its sentences when it has several.

    A long message often mixes topics, and one embedding of all of it matches none of
    them well. The vector of a multi-sentence message is the normalized sum of the whole
    line's vector and its sentences' vectors (scaled by 1/sqrt(n)), so a question about
    one sentence still finds the message. Measured on LoCoMo: evidence recall within
    2,000 tokens 0.831 -> 0.857 for vector + keyword ranking.

    Each sentence is embedded on its own, in the same call as the lines. Cheaper routes
    were measured and not kept (LoCoMo recall within 2,000 tokens, 0.903 with this one;
    docs/benchmarks.md, "Ingest"): the line alone 0.880; sentences pooled from the
    line's own forward pass ("late chunking", one pass per message) 0.879; sentences
    embedded alone and no line pass, the line taken as their token-weighted mean, 0.896.
    """
    import numpy as np

    texts = [transcript_line(m) for m in messages]
    spans = [_sentence_spans(m, line) for m, line in zip(messages, texts, strict=True)]
    parts_text = [(row, texts[row][a:b]) for row, found in enumerate(spans) for a, b in found]
    vectors = embedder.embed(texts + [f"{speaker(messages[r])}: {t}" for r, t in parts_text])
    result = np.array(vectors[: len(texts)], dtype=np.float32)
    extra = vectors[len(texts) :]
    for row in range(len(texts)):
        mine = [extra[i] for i, (r, _) in enumerate(parts_text) if r == row]
        if mine:
            result[row] = _with_parts(result[row], mine)
    return result


def _sentence_spans(message: Message, line: str) -> list[tuple[int, int]]:
    """Character spans, in ``line``, of the message's sentences of 3 words or more (none
    when it has fewer than two)."""
    from tiermem.summarize import split_sentences

    sentences = [s for s in split_sentences(message.text) if len(s.split()) >= 3]
    if len(sentences) < 2:
        return []
    spans = []
    cursor = len(line) - len(message.text)
    for sentence in sentences:
        begin = line.find(sentence, cursor)
        if begin < 0:
            continue
        spans.append((begin, begin + len(sentence)))
        cursor = begin + len(sentence)
    return spans if len(spans) > 1 else []


def _with_parts(whole: np.ndarray, parts: list[np.ndarray]) -> np.ndarray:
    """``whole`` plus the mean direction of ``parts`` (sum / sqrt(n)), unit length."""
    import numpy as np

    if not parts:
        return np.asarray(whole, dtype=np.float32)
    mixed = whole + np.sum(parts, axis=0) / np.sqrt(len(parts))
    out: np.ndarray = (mixed / np.linalg.norm(mixed)).astype(np.float32)
    return out


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
            store.append(
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
        retry_backoff: first retry delay after a failure (doubles, up to 30 s).
    """

    def __init__(
        self,
        sink: Sink,
        embedder: Embedder | None,
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
        if self.embedder is None:
            self.sink(batch, None)
            return
        own = embed_messages(self.embedder, [i.message for i in batch])
        keys = [(i.user_id, i.session_id, i.message.message_id, i.previous_id) for i in batch]
        self.sink(batch, self.context.mix(keys, own))


class ContextVectors:
    """Leans each message's vector toward the message before it in its session.

    A short reply ("Adoption agencies.") says little without the question it answers;
    adding ``CONTEXT_WEIGHT`` x the previous message's own vector lets a search for the
    topic find the answer. The own vectors of the last ``RECENT_VECTORS`` messages are
    kept in process, keyed by user and session (never shared across users); a message
    whose predecessor was embedded by another process keeps its own vector. Measured on
    LoCoMo: evidence recall within 2,000 tokens 0.857 -> 0.877 for vector + keyword ranking.
    """

    def __init__(self, size: int = RECENT_VECTORS) -> None:
        self.size = size
        self._own: OrderedDict[tuple[str, str | None, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def mix(
        self, keys: list[tuple[str, str | None, str, str | None]], own: np.ndarray
    ) -> np.ndarray:
        """The vectors to store for messages ``(user, session, id, previous id)``."""
        import numpy as np

        out = np.array(own, dtype=np.float32)
        with self._lock:
            for row, (user, session, message_id, previous_id) in enumerate(keys):
                previous = self._own.get((user, session, previous_id or ""))
                if previous is not None:
                    mixed = own[row] + CONTEXT_WEIGHT * previous
                    out[row] = mixed / np.linalg.norm(mixed)
                self._own[(user, session, message_id)] = own[row]
                if len(self._own) > self.size:
                    self._own.popitem(last=False)
        return out

    def drop_user(self, user_id: str) -> None:
        """Forget the user's vectors (erasure)."""
        with self._lock:
            for key in [k for k in self._own if k[0] == user_id]:
                del self._own[key]
