"""The store worker: finishes, in any process, the work that adding messages leaves.

Adding a message commits it to the transcript, nothing more. A :class:`StoreWorker` (one
background :class:`~tiermem.runner.Runner` per :class:`~tiermem.Memory`, on the store's
clock) claims pending rows from the store with a lease, embeds them in batches and
writes their index rows, vectors included; then it folds the messages that have left
each session's window into the session's running summary. Any process sharing the store
shares this work: a row claimed by a process that dies is claimed again when its lease
expires, and only the holder of a row's lease completes it (one index row per line of a
user), so nothing is indexed twice.

A batch whose embedding fails is retried row by row, so one bad row (a text the
embedder rejects) never holds up another; a row that keeps failing is retried with
backoff, then marked ``failed`` with its reason (``Memory.failed``), where it can be
retried or erased. An embedder that is down rather than refusing a row (unreachable, a
timeout, 429, 5xx, rejected credentials, its circuit breaker open, or a connection-level
error of a user's own embedder class: Python's ``ConnectionError``, ``TimeoutError`` or
another ``OSError``; :func:`embedder_down`) fails no row: the claimed rows go back
uncounted and are claimed again once the embedder may be tried again: when its circuit
breaker lets its probe go, or after :data:`OUTAGE_PROBE` seconds for an embedder without
one. The wait does not grow with the outage, so rows are embedded within about that
long once the embedder is back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tiermem.breaker import CircuitBreaker, model_unavailable
from tiermem.embeddings.cache import content_hash
from tiermem.errors import StoreError
from tiermem.runner import Backoff, Runner, backoff_delay
from tiermem.stores.queue import WorkItem
from tiermem.stores.records import NewMemory
from tiermem.stores.validate import check_vector
from tiermem.work.vectors import ContextVectors, PassageSettings, embed_with_passages

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder
    from tiermem.facts.worker import FactWorker
    from tiermem.stores.protocol import MemoryStore
    from tiermem.summaries.summarize import Summarizer
    from tiermem.tokens import TokenCounter

log = logging.getLogger(__name__)

COMPLETE_ROWS = 8
"""Messages indexed per transaction. An add waits for the write transaction in progress
(SQLite has one writer), so the worker keeps its transactions short: indexing a message
(its line, sentences, vectors and keyword rows) takes about half a millisecond."""

MAX_OUTAGE_WAIT = 30.0
"""Seconds at most between two looks at a store that refuses rounds."""
PASSAGES = PassageSettings()
"""When a long message is also indexed as passages, unless the worker is told otherwise."""
OUTAGE_PROBE = 1.0
"""Seconds rows given back wait while an embedder without a circuit breaker of its own
is down (one batch tries it again then)."""


def embedder_down(exc: BaseException) -> bool:
    """Whether an embedding error is the embedder's state rather than the row's: it would
    fail any row alike, so no row is marked failed for it
    (:func:`tiermem.breaker.model_unavailable`: a provider's outage, timeout, 429, 5xx,
    rejected credentials or open breaker, or a ``ConnectionError`` / other ``OSError``
    that an embedder of one's own raises)."""
    return model_unavailable(exc)


class StoreWorker:
    """Claims, embeds and summarizes the store's pending work on a background thread.

    Args:
        store: the store holding the transcript.
        embedder: embeds claimed messages (one call per batch).
        summarizer: returns the summarizer for session summaries (built on first use).
        window: messages of a session kept out of its summary (the buffer size).
        summary_batch: messages that must have left the window before a summary is made.
        batch_size: rows claimed and embedded at once.
        lease: seconds a claim is held before another process may take the rows (the
            background runner renews what a round holds every third of it).
        max_attempts: tries of one row before it is marked failed.
        retry_backoff: seconds before a failed row's first retry (doubles per try), and
            between tries of an embedder that is down while its breaker still counts.
        delay: seconds a wake-up waits before claiming, so a burst of adds is embedded in
            one batch (fewer, larger transactions beside the adds).
        idle_interval: seconds between looks at the store when there is nothing to do
            (and the first wait after a round the store refused; it doubles while the
            store stays down, up to :data:`MAX_OUTAGE_WAIT`).
        background: run a background thread (False: only :meth:`flush`, :meth:`drain`
            and :meth:`run_once` do work, in the caller's thread; other processes may).
        facts: extracts facts from the sessions whose messages it embedded (if given).
        passages: when a long message is also indexed as passages (None: never).
        counter: counts each indexed line's tokens, stored with it, so that a context
            counts only what it renders (:func:`~tiermem.tokens.counted_line`; None: the
            planner counts every line it weighs).
    """

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        summarizer: Callable[[], Summarizer] | None = None,
        *,
        window: int = 50,
        summary_batch: int = 10,
        batch_size: int = 64,
        lease: float = 60.0,
        max_attempts: int = 3,
        retry_backoff: float = 0.5,
        delay: float = 0.05,
        idle_interval: float = 1.0,
        background: bool = True,
        facts: FactWorker | None = None,
        passages: PassageSettings | None = PASSAGES,
        counter: TokenCounter | None = None,
    ) -> None:
        self.store = store
        self.passages = passages
        self.counter = counter
        self.embedder = embedder
        self._summarizer_factory = summarizer
        self._summarizer: Summarizer | None = None
        self.window = window
        self.summary_batch = summary_batch
        self.batch_size = batch_size
        self.lease = lease
        self.max_attempts = max_attempts
        self.retry_backoff = retry_backoff
        self.idle_interval = idle_interval
        self.delay = delay
        self.background = background
        self.facts = facts
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.context = ContextVectors()
        self.last_error: BaseException | None = None
        self.failures = 0
        """Rows whose embedding failed (each retried alone) since start."""
        self.outages = 0
        """Batches given back because the embedder was down, since start."""
        self.clock = store.clock
        self._lock = threading.Lock()
        self._rounds = 0  # rounds in progress (this thread's and flush callers')
        self._held_rows: set[tuple[str, int]] = set()  # claimed, not yet completed
        self._held_summaries: set[tuple[str, str | None]] = set()  # being folded
        self._runner = Runner(
            self._background_round,
            name="tiermem-worker",
            clock=self.clock,
            idle=idle_interval,
            gather=delay,
            backoff=Backoff(idle_interval, MAX_OUTAGE_WAIT),
            on_error=self._store_down,
            renew=self._renew,
            renew_every=lease / 3,
        )

    # -- control --

    def wake(self) -> None:
        """New rows were added: look for work now (starts the thread on first use)."""
        if self.background:
            self._runner.wake()

    def close(self, timeout: float | None = 30.0) -> None:
        """Stop the thread after the batch in hand; unclaimed work stays in the store."""
        self._runner.close(timeout)
        if self.facts is not None:
            self.facts.close(timeout)

    def flush(self, timeout: float | None = None) -> bool:
        """Work until the store has no pending row; False on timeout.

        Rows another process holds are waited for; rows that fail end as ``failed`` after
        their last try, so a flush ends even when some never succeed.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.run_once() == 0:
                idle = self._rounds == 0  # no round of this process is still summarizing
                if idle and self.store.queue.work_stats().pending == 0:
                    left = None if deadline is None else deadline - time.monotonic()
                    return self.facts is None or self.facts.flush(left)
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)  # another process holds the rest: look again
            elif deadline is not None and time.monotonic() >= deadline:
                return False

    def drain(self, timeout: float | None = None) -> bool:
        """Do the work that can be claimed now (not what other processes hold); False if
        some was left at ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.run_once():
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    def _background_round(self) -> bool:
        """The runner's round: one batch; more is waiting if it was full."""
        return self.run_once() >= self.batch_size

    def _renew(self) -> int:
        """Extend the leases of the rows and summaries a round is working on."""
        with self._lock:
            rows, summaries = tuple(self._held_rows), tuple(self._held_summaries)
        if not (rows or summaries):
            return 0
        return self.store.queue.renew(self.owner, self.lease, rows, summaries)

    def _store_down(self, exc: Exception, wait: float) -> None:
        self.last_error = exc
        log.warning("store worker: %s; retrying in %.1fs", exc, wait)

    # -- one round --

    def run_once(self) -> int:
        """Claim one batch, embed it, index it and fold what left a window into its
        session's summary; the rows handled."""
        with self._lock:
            self._rounds += 1
        try:
            return self._round()
        finally:
            with self._lock:
                self._rounds -= 1

    def _round(self) -> int:
        items = self.store.queue.claim(self.owner, self.batch_size, self.lease)
        if not items:
            return 0
        keys = {(i.user_id, i.seq) for i in items}
        with self._lock:
            self._held_rows |= keys
        try:
            if not self._index(items):
                return 0  # the embedder is down: the rows were given back
        finally:
            with self._lock:
                self._held_rows -= keys
        sessions = {(i.user_id, i.session_id) for i in items}
        self._summarize(sessions)
        if self.facts is not None:
            self.facts.notify(sessions)
        return len(items)

    def _index(self, items: list[WorkItem]) -> bool:
        """Embed the claimed rows and complete them (or record why not); False when the
        embedder is down and they were given back."""
        try:
            vectors = self._embed(items)
        except Exception as exc:
            if embedder_down(exc):
                self._give_back(items, exc)
                return False
            log.warning("embedding %d messages failed (%s); retrying each alone", len(items), exc)
            vectors = self._embed_alone(items)
        by_user: dict[str, list[tuple[int, NewMemory, tuple[NewMemory, ...]]]] = {}
        for item, found in zip(items, vectors, strict=True):
            if found is not None:
                row, derived = self._rows(item, *found)
                by_user.setdefault(item.user_id, []).append((item.seq, row, derived))
        for user, rows in by_user.items():
            for start in range(0, len(rows), COMPLETE_ROWS):
                self.store.queue.complete(self.owner, user, rows[start : start + COMPLETE_ROWS])
        return True

    def _rows(
        self, item: WorkItem, vector: Any, passages: list[Any], standing: list[Any]
    ) -> tuple[NewMemory, tuple[NewMemory, ...]]:
        """``item``'s index row and the rows of its passages and standing instructions,
        each line's tokens counted. A counter that fails is dropped (the counts save a
        context time; they never hold up indexing): its lines are counted in contexts."""
        counter = self.counter
        try:
            return (
                item.index_row(vector, len(passages), counter),
                item.derived_rows(passages, standing, counter),
            )
        except Exception as exc:
            if counter is None:
                raise
            log.warning("counting tokens failed (%s); indexing without the counts", exc)
            self.counter = None
            return self._rows(item, vector, passages, standing)

    def _embed(self, items: list[WorkItem]) -> list[tuple[Any, list[Any], list[Any]]]:
        """The vector to index each of ``items`` with, and the spans and vectors of its
        passages and of the standing instructions it states. Identical lines are embedded
        once (hashed before the embedder is called, as simonw/llm does): a line's own
        vector depends on its text alone; the context each message's vector leans toward
        is its own."""
        first: dict[str, int] = {}
        slots = [first.setdefault(content_hash(i.line), len(first)) for i in items]
        unique = [items[slots.index(n)] for n in range(len(first))]
        embedded = embed_with_passages(self.embedder, [i.message for i in unique], self.passages)
        for row in embedded.vectors:
            check_vector(row, self.store.dimension)
        own = embedded.vectors[slots]
        keys = [(i.user_id, i.session_id, i.message.message_id, i.previous_id) for i in items]
        mixed = self.context.mix(keys, own)
        return [
            (mixed[n], embedded.passages[slot], embedded.standing[slot])
            for n, slot in enumerate(slots)
        ]

    def _embed_alone(self, items: list[WorkItem]) -> list[Any]:
        """Embed each row on its own; a row that fails is recorded and left out (and, if
        the embedder went down meanwhile, the rows not embedded yet are given back)."""
        vectors: list[Any] = []
        for position, item in enumerate(items):
            try:
                vectors.append(self._embed([item])[0])
            except Exception as exc:
                if embedder_down(exc):
                    self._give_back(items[position:], exc)
                    return vectors + [None] * (len(items) - position)
                self.failures += 1
                self.last_error = exc
                retry_in = backoff_delay(self.retry_backoff, item.attempts - 1)
                reason = f"{type(exc).__name__}: {exc}"
                self.store.queue.fail(self.owner, item, reason, retry_in, self.max_attempts)
                vectors.append(None)
        return vectors

    def _give_back(self, items: list[WorkItem], exc: BaseException) -> None:
        """The embedder is down: release ``items`` uncounted, due when it may be tried
        again (:meth:`outage_wait`)."""
        self.outages += 1
        self.last_error = exc
        wait = self.outage_wait()
        log.warning("the embedder is down (%s); %d messages wait %.1fs", exc, len(items), wait)
        by_user: dict[str, list[int]] = {}
        for item in items:
            by_user.setdefault(item.user_id, []).append(item.seq)
        self.store.queue.release(self.owner, by_user, wait)

    def outage_wait(self) -> float:
        """Seconds rows given back wait while the embedder is down: until its circuit
        breaker lets the probe go (the probe decides; ``retry_backoff`` while it is still
        closed and counting failures), or :data:`OUTAGE_PROBE` for an embedder without
        one; the same however long the outage has lasted."""
        breaker = getattr(self.embedder, "breaker", None)
        if isinstance(breaker, CircuitBreaker):
            return max(breaker.retry_in(), self.retry_backoff)
        return OUTAGE_PROBE

    # -- summaries --

    def _summarize(self, sessions: set[tuple[str, str | None]]) -> None:
        if self._summarizer_factory is None:
            return
        for user_id, session_id in sessions:
            try:
                self.summarize_session(user_id, session_id)
            except StoreError as exc:
                self.last_error = exc
                log.warning("summarizing a session failed: %s", exc)

    def summarize_session(
        self,
        user_id: str,
        session_id: str | None,
        *,
        window: int | None = None,
        batch: int | None = None,
        wait: float = 0.0,
    ) -> str | None:
        """Fold the session's messages older than ``window`` into its summary if at least
        ``batch`` are waiting; the new summary or None. While another process folds the
        session (it holds the summary's lease), wait up to ``wait`` seconds for it to
        finish, then fold what it left."""
        deadline = time.monotonic() + wait
        while True:
            due = self.store.queue.summary_due(
                self.owner,
                user_id,
                session_id,
                self.window if window is None else window,
                self.summary_batch if batch is None else batch,
                self.lease,
            )
            if due is not None:
                break
            if time.monotonic() >= deadline or not self._unfolded(user_id, session_id):
                return None
            time.sleep(0.05)
        summary, rows = due
        key = (user_id, session_id)
        with self._lock:
            self._held_summaries.add(key)
        try:
            text = self._fold([r.message for r in rows], summary.text)
            saved = self.store.queue.save_summary(
                self.owner, user_id, session_id, text, summary.upto, rows[-1].seq
            )
        finally:
            with self._lock:
                self._held_summaries.discard(key)
        return text if saved else None

    def _unfolded(self, user_id: str, session_id: str | None) -> bool:
        """Whether the session has messages its summary does not cover yet."""
        upto = self.store.transcript.summary(user_id, session_id).upto
        after = self.store.transcript.rows(
            user_id, session_id=session_id, any_session=False, after=upto, limit=1
        )
        return bool(after)

    def _fold(self, messages: list[Any], previous: str | None) -> str:
        """The summary with ``messages`` merged in; the offline summarizer if the LLM fails."""
        from tiermem.summaries.summarize import ExtractiveSummarizer

        if self._summarizer is None:
            assert self._summarizer_factory is not None
            self._summarizer = self._summarizer_factory()
        try:
            return self._summarizer.summarize(messages, previous)
        except Exception as exc:
            log.warning("summarizer failed (%s); using the extractive summary", exc)
            return ExtractiveSummarizer().summarize(messages, previous)
