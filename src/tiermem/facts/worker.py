"""Facts from conversations: extracted in batches off the hot path, versioned on change.

A :class:`FactWorker` runs beside the :class:`~tiermem.work.worker.StoreWorker`: when a
session has at least ``batch`` messages past its mark it leases the session's user from
the store (:class:`~tiermem.stores.facts.FactsDueOp`), shows the batch and the user's
related current facts to an extractor (:mod:`tiermem.facts.extract`: one LLM call, or offline
rules), decides per candidate (add, update, supersede, none), embeds the new facts and
saves everything with the mark in one transaction (:class:`~tiermem.stores.facts.
SaveFactsOp`). Extraction runs on a small thread pool, never on ``add``; when it fails
(the LLM is down, rate limited, too slow) the mark stays, the session waits with backoff
and embedding and other users carry on. A malformed answer falls back to the offline
extractor for that batch. A periodic sweep (a :class:`~tiermem.runner.Runner` on the
store's clock) finds batches a dead process left. The extractions themselves are jobs on
the pool, one per session, not a loop: they run until the session has nothing due.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tiermem.errors import MalformedAnswerError
from tiermem.facts.extract import (
    Extractor,
    FactCandidate,
    KnownFact,
    OfflineExtractor,
    SourceMessage,
    date_label,
)
from tiermem.messages import speaker, transcript_line
from tiermem.runner import Backoff, Runner, backoff_delay
from tiermem.stores.facts import FactsDue, FactWrite
from tiermem.stores.ops import ListOp, SearchOp
from tiermem.stores.records import NewMemory
from tiermem.text import folded, term_set
from tiermem.types.filters import MemoryFilter

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder
    from tiermem.stores.protocol import MemoryStore
    from tiermem.types.records import MemoryRecord
    from tiermem.types.transcript import TranscriptRow

log = logging.getLogger(__name__)

CURRENT = MemoryFilter(memory_types=("fact",), metadata={"valid_until": None})
"""The user's current facts (a fact extracted from conversations has ``valid_until``)."""
FACT_IMPORTANCE = 0.6
MERGE_OVERLAP = 0.8
"""Word-set Jaccard at which an offline candidate restates a known fact."""
EVIDENCE_CHARS = 200


@dataclass
class FactStats:
    """What a worker did since it started."""

    batches: int = 0
    added: int = 0
    merged: int = 0
    superseded: int = 0
    failures: int = 0
    fallbacks: int = 0
    """Batches whose LLM answer was malformed and the offline extractor read instead."""


class FactWorker:
    """Extracts facts from sessions' new messages on a bounded pool of threads.

    Args:
        store: the store holding the transcript and the facts.
        embedder: embeds new facts and the batch (to find related known facts).
        extractor: returns the extractor (built on first use; offline if none given).
        batch: new messages a session needs before it is extracted.
        max_batch: most messages read in one extraction (one LLM call).
        lease: seconds a user is leased to one extraction.
        concurrency: extractions running at once in this process.
        retry_backoff: seconds before a failed batch's first retry (doubles per failure).
        max_backoff: the longest wait between retries.
        related: known facts shown to the extractor per batch.
        sweep_interval: seconds between looks for batches nobody took (a dead process's).
    """

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        extractor: Callable[[], Extractor] | None = None,
        *,
        batch: int = 20,
        max_batch: int = 50,
        lease: float = 120.0,
        concurrency: int = 2,
        retry_backoff: float = 2.0,
        max_backoff: float = 300.0,
        related: int = 20,
        sweep_interval: float = 30.0,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self._extractor_factory = extractor or OfflineExtractor
        self._extractor: Extractor | None = None
        self.offline = OfflineExtractor()
        self.batch = batch
        self.max_batch = max(max_batch, batch)
        self.lease = lease
        self.retry_backoff = retry_backoff
        self.max_backoff = max_backoff
        self.related = related
        self.sweep_interval = sweep_interval
        self.owner = f"{os.getpid()}-facts-{uuid.uuid4().hex[:12]}"
        self.stats = FactStats()
        self.last_error: BaseException | None = None
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="tiermem-facts")
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str | None], Future[None]] = {}
        self._leased: Counter[str] = Counter()  # users an extraction of ours holds
        self._closed = threading.Event()
        self._sweeper = Runner(
            self._sweep_round,
            name="tiermem-facts-sweep",
            clock=store.clock,
            idle=sweep_interval,
            backoff=Backoff(sweep_interval, max_backoff),
            on_error=self._sweep_failed,
            renew=self._renew,
            renew_every=lease / 3,
        )
        self._sweeper.start()

    @property
    def extractor(self) -> Extractor:
        if self._extractor is None:
            self._extractor = self._extractor_factory()
        return self._extractor

    # -- scheduling --

    def notify(self, sessions: Iterable[tuple[str, str | None]]) -> None:
        """Sessions got new messages: extract those that are due, in the background."""
        with self._lock:
            if self._closed.is_set():
                return
            for key in sessions:
                if key not in self._running:
                    self._running[key] = self._pool.submit(self._drain, *key)

    def _drain(self, user_id: str, session_id: str | None) -> None:
        try:
            while self.extract_session(user_id, session_id) is not None:
                if self._closed.is_set():
                    return
        except Exception as exc:  # recorded; the sweep or the next message tries again
            self.last_error = exc
            log.warning("fact extraction for a session failed: %s", exc)
        finally:
            with self._lock:
                self._running.pop((user_id, session_id), None)

    def sweep(self) -> int:
        """Queue every due session of any user (those a dead process left too)."""
        due = self.store.queue.due_fact_sessions(self.batch, 100)
        self.notify(due)
        return len(due)

    def _sweep_round(self) -> bool:
        self.sweep()
        return False  # the next look is after the interval

    def _sweep_failed(self, exc: Exception, wait: float) -> None:
        self.last_error = exc
        log.warning("looking for due fact extractions failed: %s; again in %.1fs", exc, wait)

    def flush(self, timeout: float | None = None) -> bool:
        """Extract every session that is due (in this process's pool) and wait for it;
        False on timeout. Sessions waiting for a retry, or whose user another process
        holds, are not waited for."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                running = list(self._running.values())
            if not running and (self._closed.is_set() or self.sweep() == 0):
                return True
            with self._lock:
                running = list(self._running.values())
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            wait_futures(running, timeout=left)

    def close(self, timeout: float | None = 30.0) -> None:
        """Stop after the extractions under way; what is left stays due in the store."""
        self._closed.set()
        self._sweeper.close(timeout)
        self.flush(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- one batch --

    def extract_session(
        self, user_id: str, session_id: str | None, *, force: bool = False
    ) -> list[str] | None:
        """Extract the session's next batch if it is due (``force``: any new message);
        the ids of the facts written, or None when nothing was due or another process
        has the user. Raises the extractor's error after recording it (mark kept)."""
        due = self.store.queue.facts_due(
            self.owner,
            user_id,
            session_id,
            1 if force else self.batch,
            self.max_batch,
            self.lease,
            force,
        )
        if due is None:
            return None
        with self._lock:
            self._leased[user_id] += 1
        try:
            saved = self._extract(user_id, session_id, due)
        finally:
            with self._lock:
                self._leased[user_id] -= 1
                if not self._leased[user_id]:
                    del self._leased[user_id]
        if saved is not None:
            self.stats.batches += 1
        return None if saved is None else list(saved)

    def _extract(self, user_id: str, session_id: str | None, due: FactsDue) -> list[str] | None:
        """Extract the leased batch and save it (None: the lease was lost); a failure is
        recorded with its retry time, then raised."""
        try:
            writes = self._writes(user_id, session_id, due.rows)
        except Exception as exc:
            self.stats.failures += 1
            self.last_error = exc
            mark = self.store.queue.fact_mark(user_id, session_id)
            retry_in = backoff_delay(self.retry_backoff, mark.attempts, self.max_backoff)
            reason = f"{type(exc).__name__}: {exc}"
            self.store.queue.facts_fail(self.owner, user_id, session_id, reason, retry_in)
            raise
        return self.store.queue.save_facts(
            self.owner, user_id, session_id, due.upto, due.rows[-1].seq, writes
        )

    def _renew(self) -> int:
        """Extend the leases of the users whose extraction is under way here."""
        with self._lock:
            users = tuple(self._leased)
        return self.store.queue.renew(self.owner, self.lease, fact_users=users) if users else 0

    def _writes(
        self, user_id: str, session_id: str | None, rows: list[TranscriptRow]
    ) -> list[FactWrite]:
        messages = [_source(i, r) for i, r in enumerate(rows, 1)]
        known = self._related(user_id, messages)
        extractor = self.extractor
        try:
            candidates = extractor.extract(messages, known)
        except MalformedAnswerError as exc:
            log.warning("malformed fact extraction answer (%s); using the offline rules", exc)
            self.stats.fallbacks += 1
            extractor = self.offline
            candidates = extractor.extract(messages, known)
        return self._decide(user_id, session_id, candidates, messages, extractor.name)

    def _related(self, user_id: str, messages: list[SourceMessage]) -> list[KnownFact]:
        """The user's current facts closest to the batch (vector and keyword)."""
        if self.related <= 0 or not messages:
            return []
        text = " ".join(m.text for m in messages)[: getattr(self.embedder, "max_chars", 2000)]
        vector = self.embedder.embed([text])[0]
        ops = [
            SearchOp(user_id, "vector", vector, None, self.related, CURRENT, False),
            SearchOp(user_id, "keyword", None, text, self.related, CURRENT, False),
        ]
        found: dict[str, str] = {}
        for hits in self.store.batch(ops):
            for hit in hits:
                found.setdefault(str(hit.record.id), hit.record.content)
        chosen = list(found.items())[: self.related]
        return [KnownFact(i, f"f{n}", text) for n, (i, text) in enumerate(chosen, 1)]

    # -- decisions --

    def _decide(
        self,
        user_id: str,
        session_id: str | None,
        candidates: list[FactCandidate],
        messages: list[SourceMessage],
        extractor: str,
    ) -> list[FactWrite]:
        """One write per distinct candidate: merge a repeat, close what it supersedes."""
        by_id = {m.message_id: m for m in messages}
        unique: dict[str, FactCandidate] = {}
        for c in candidates:
            claim = c.claim or folded(c.text)
            if not claim:
                continue
            if claim in unique:  # said twice in the batch: one fact, both sources
                first = unique[claim]
                first.sources = tuple(dict.fromkeys(first.sources + c.sources))
            else:
                unique[claim] = c
        if not unique:
            return []
        claims = list(unique)
        vectors = self.embedder.embed([unique[k].text for k in claims])
        searches: list[Any] = [
            SearchOp(user_id, "hybrid", vector, unique[claim].text, 5, CURRENT, False)
            for claim, vector in zip(claims, vectors, strict=True)
        ]
        slot_ops = [_slot_op(user_id, c.slot) for c in unique.values() if c.slot is not None]
        results = self.store.batch([*searches, *slot_ops])
        hits, slot_hits = results[: len(claims)], iter(results[len(claims) :])
        writes: list[FactWrite] = []
        for claim, vector, found in zip(claims, vectors, hits, strict=True):
            c = unique[claim]
            sources = [by_id[s] for s in c.sources if s in by_id]
            evidence = tuple(s.line[:EVIDENCE_CHARS] for s in sources[:3])
            same_slot = next(slot_hits) if c.slot is not None else []
            repeat = _restated(claim, found, fuzzy=c.action is None)
            if repeat is not None or (c.action == "none" and c.target is not None):
                self.stats.merged += 1
                target = repeat if repeat is not None else c.target
                writes.append(
                    FactWrite(None, merge_into=target, sources=c.sources, evidence=evidence)
                )
                continue
            replaces, change = None, None
            if c.action in ("update", "supersede") and c.target is not None:
                replaces, change = c.target, c.action
            elif c.action is None and same_slot:
                replaces, change = str(same_slot[0].id), "supersede"
            if replaces is not None:
                self.stats.superseded += 1
            self.stats.added += 1
            when = max((s.timestamp for s in sources), default=None)
            metadata: dict[str, Any] = {
                "claim": claim,
                "sources": list(c.sources),
                "evidence": list(evidence),
                "valid_from": when.isoformat() if when is not None else None,
                "valid_until": None,
                "extractor": extractor,
                "mentions": len(c.sources) or 1,
            }
            if c.slot is not None:
                metadata["slot"] = c.slot
            if replaces is not None:
                metadata["replaces"] = replaces
                metadata["change"] = change
            memory = NewMemory(
                c.text,
                embedding=vector,
                memory_type="fact",
                session_id=session_id,
                importance=FACT_IMPORTANCE,
                metadata=metadata,
                created_at=when,
            )
            writes.append(FactWrite(memory, replaces, change, sources=c.sources, evidence=evidence))
        return writes


def _source(index: int, row: TranscriptRow) -> SourceMessage:
    message = row.message
    return SourceMessage(
        message.message_id,
        f"m{index}",
        transcript_line(message),
        message.text,
        speaker(message),
        message.role,
        message.timestamp,
    )


def _slot_op(user_id: str, slot: str) -> ListOp:
    """The user's current fact holding ``slot`` (offline: "ana|home")."""
    flt = MemoryFilter(memory_types=("fact",), metadata={"valid_until": None, "slot": slot})
    return ListOp(user_id, flt, 1)


def _restated(claim: str, hits: list[Any], *, fuzzy: bool) -> str | None:
    """The known fact a candidate restates: the same claim, or (``fuzzy``, for rule-made
    candidates) nearly the same words."""
    words = term_set(claim)
    for hit in hits:
        record: MemoryRecord = hit.record
        other = record.metadata.get("claim") or folded(record.content)
        if other == claim:
            return str(record.id)
        theirs = term_set(other)
        if fuzzy and words and len(words & theirs) >= MERGE_OVERLAP * len(words | theirs):
            return str(record.id)
    return None


def fact_line(record: MemoryRecord) -> tuple[str, bool, tuple[str, ...], tuple[str, ...]]:
    """How a stored memory enters a context: its text (a superseded fact says until when
    it held), whether it is current, the lines it was read from and their message ids."""
    metadata = record.metadata or {}
    evidence, ids = metadata.get("evidence"), metadata.get("sources")
    lines = tuple(str(e) for e in evidence) if isinstance(evidence, list) else ()
    sources = tuple(str(i) for i in ids) if isinstance(ids, list) else ()
    until = metadata.get("valid_until")
    if record.memory_type != "fact" or not until:
        return record.content, True, lines, sources
    try:
        label = date_label(datetime.fromisoformat(str(until)))
    except ValueError:
        return record.content, False, lines, sources
    return f"{record.content} (until {label})", False, lines, sources
