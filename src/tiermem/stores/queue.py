"""The work queue: what adding messages leaves to do, claimed by any process with a lease.

A transcript row's work state (``pending`` / ``done`` / ``failed``) says whether a worker
still has to embed it and write its index row. Workers in any process claim pending rows
with a lease (:class:`ClaimOp`), embed them, and complete them (:class:`CompleteOp`: the
index row, with its vector, in the same transaction) or record the failure
(:class:`FailOp`), or, when the embedder is down rather than refusing the row, give them
back uncounted (:class:`ReleaseOp`); a row whose claimant died is claimed again when its
lease expires; a worker whose round is slow renews what it holds (:class:`RenewOp`). A
session's running summary is leased the same way (:class:`SummaryDueOp`,
:class:`SaveSummaryOp`), and so is a user's fact extraction (the ops of
:mod:`tiermem.stores.facts`). Lease times are the store's ``clock``
(:attr:`~tiermem.stores.protocol.MemoryStore.clock`): wall-clock seconds, taken in Python
(not from the database) and compared by every process with its own clock; a test moves a
manual one.

:class:`WorkQueue`, the part a store holds as ``store.queue``, derives a typed method for
each from the store's ``batch``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.messages import Message, speaker
from tiermem.stores.facts import (
    DueSessionsOp,
    FactMark,
    FactMarkOp,
    FactsDue,
    FactsDueOp,
    FactsFailOp,
    FactVersionsOp,
    FactWrite,
    SaveFactsOp,
)
from tiermem.stores.parts import Part
from tiermem.stores.records import NewMemory
from tiermem.stores.transcript import SessionSummary, message_columns
from tiermem.tokens import LINE_TOKENS, TokenCounter, counted_line
from tiermem.types.checks import check_user_id
from tiermem.types.records import MemoryRecord
from tiermem.types.transcript import TranscriptRow, WorkStats

# -- data ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkItem:
    """A claimed transcript row: ``message`` and its stored ``line`` to embed and index."""

    seq: int
    user_id: str
    session_id: str | None
    message: Message
    line: str
    agent_id: str | None
    previous_id: str | None
    attempts: int

    def index_row(
        self, vector: Any, passages: int = 0, counter: TokenCounter | None = None
    ) -> NewMemory:
        """The row's index record: memory_type ``message`` (``tool`` for tool results), its
        time, and metadata linking it to the message and the one before it (and, for a
        long message, how many ``passages`` it has; with a ``counter``, its line's
        tokens: :func:`~tiermem.tokens.counted_line`)."""
        message = self.message
        metadata = {
            "message_id": message.message_id,
            "role": message.role,
            **{k: v for k, v in message.metadata.items() if _is_scalar(v)},
        }
        if passages:
            metadata["passages"] = passages
        if message.name:
            metadata["name"] = message.name
        if self.previous_id:
            metadata["previous_id"] = self.previous_id
        if counter is not None:
            metadata[LINE_TOKENS] = counted_line(counter, self.line)
        return NewMemory(
            content=self.line,
            embedding=vector,
            memory_type="tool" if message.role == "tool" else "message",
            agent_id=self.agent_id,
            session_id=self.session_id,
            importance=0.3,
            metadata=metadata,
            created_at=message.timestamp,
        )

    def derived_rows(
        self,
        passages: Sequence[tuple[tuple[int, int], Any]],
        standing: Sequence[tuple[tuple[int, int], Any]] = (),
        counter: TokenCounter | None = None,
    ) -> tuple[NewMemory, ...]:
        """Index records of spans of the message, each ``((start, end), vector)``: its
        ``passages`` (memory_type ``passage``, numbered by ``part``) and the ``standing``
        instructions or preferences it states (memory_type ``preference``). Each has the
        message's time and session, and metadata naming the message, the span of its
        text and who said it (the store adds ``parent``, the id of the message's own
        record, when it indexes them: they go with it); with a ``counter``, the span's
        tokens."""
        message = self.message
        text = message.text
        kinds = [("passage", p) for p in passages] + [("preference", s) for s in standing]
        return tuple(
            NewMemory(
                content=text[start:end],
                embedding=vector,
                memory_type=kind,
                agent_id=self.agent_id,
                session_id=self.session_id,
                importance=0.3 if kind == "passage" else 0.7,
                metadata={
                    "excerpt_of": message.message_id,
                    "part": part,
                    "start": start,
                    "end": end,
                    "length": len(text),
                    "speaker": speaker(message),
                    **(
                        {}
                        if counter is None
                        else {LINE_TOKENS: counted_line(counter, text[start:end])}
                    ),
                },
                created_at=message.timestamp,
            )
            for part, (kind, ((start, end), vector)) in enumerate(kinds)
        )


@dataclass(frozen=True)
class QueueStats:
    """The work queue as a worker process reports it (every user's rows not done)."""

    pending: int
    """Rows waiting to be indexed, claimed ones included."""
    claimed: int
    """Pending rows under a live lease (a worker has them in hand)."""
    failed: int
    oldest_pending: float | None
    """When the oldest pending row was added (epoch seconds); None when none is."""


def work_item(row: Any, attempts: int) -> WorkItem:
    """The claimed transcript row ``row`` (read by column name)."""
    return WorkItem(**message_columns(row), line=row["line"], attempts=attempts)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


# -- operations ----------------------------------------------------------------------


class ClaimOp(NamedTuple):
    """Admin (every user): lease up to ``limit`` pending rows to ``owner`` for
    ``lease`` seconds, oldest first; rows leased by a live claim are skipped."""

    owner: str
    limit: int
    lease: float


class CompleteOp(NamedTuple):
    """Index claimed rows the owner still holds and mark them done: ``items`` are
    (seq, the index row as a NewMemory with its vector, the rows of its passages), all of
    ``user_id``. A line the user already has keeps its row. Result: rows completed."""

    owner: str
    user_id: str
    items: tuple[tuple[int, NewMemory, tuple[NewMemory, ...]], ...]


class FailOp(NamedTuple):
    """A claimed row failed: retry it alone after ``retry_in`` seconds, or mark it
    ``failed`` with ``error`` once it has had ``max_attempts``."""

    owner: str
    user_id: str
    seq: int
    error: str
    retry_in: float
    max_attempts: int


class ReleaseOp(NamedTuple):
    """The claimed rows ``seqs`` of ``user_id`` wait for a dependency that is down: give
    them back, due in ``retry_in`` seconds, without counting the try. Result: rows given back."""

    owner: str
    user_id: str
    seqs: tuple[int, ...]
    retry_in: float


class RenewOp(NamedTuple):
    """Extend to ``lease`` seconds from now the leases ``owner`` still holds among
    ``rows`` (claimed transcript rows, as (user, seq)), ``summaries`` (session summaries,
    as (user, session)) and ``fact_users`` (users' fact extractions): a slow round keeps
    its work. A lease another process took, or one being written this moment, is left as
    it is. Result: leases extended."""

    owner: str
    lease: float
    rows: tuple[tuple[str, int], ...] = ()
    summaries: tuple[tuple[str, str | None], ...] = ()
    fact_users: tuple[str, ...] = ()


class RetryOp(NamedTuple):
    """Put a user's failed rows (all, or ``seqs``) back to pending; result: how many."""

    user_id: str
    seqs: tuple[int, ...] | None = None


class WorkStatsOp(NamedTuple):
    """Rows by work state for one user (``None``: every user, admin)."""

    user_id: str | None


class QueueStatsOp(NamedTuple):
    """Admin (every user): :class:`QueueStats`. It reads only the rows not done (the
    partial index on them), so it stays cheap however big the store grows; a worker's
    /metrics runs it on every scrape."""


class HeldOp(NamedTuple):
    """Admin (every user): the pending rows ``owner`` holds under a live lease, their
    seqs per user (what a stopping worker gives back with :class:`ReleaseOp`)."""

    owner: str


class SummaryDueOp(NamedTuple):
    """Lease a session's summary to ``owner`` if at least ``batch`` messages have left the
    newest ``window`` since it was written; result: the messages to fold in (oldest
    first) and the current summary, or ``None`` when nothing is due or another process
    holds the lease."""

    owner: str
    user_id: str
    session_id: str | None
    window: int
    batch: int
    lease: float


class SaveSummaryOp(NamedTuple):
    """Write a session's summary covering up to ``upto`` if ``owner`` still holds its
    lease and it still covers ``previous``; result: whether it was written."""

    owner: str
    user_id: str
    session_id: str | None
    text: str
    previous: int
    upto: int


# -- the part ---------------------------------------------------------------------------


class WorkQueue(Part):
    """Claims, leases and dues of background work; every method runs one transaction.

    ``owner`` names the claiming process (a lease is only honoured for its holder); lease
    times are the store's ``clock``.
    """

    def claim(self, owner: str, limit: int, lease: float) -> list[WorkItem]:
        """Lease up to ``limit`` pending rows (every user's), oldest first."""
        return cast(list[WorkItem], self._step(ClaimOp(owner, limit, lease)))

    def complete(
        self,
        owner: str,
        user_id: str,
        items: Sequence[tuple[int, NewMemory] | tuple[int, NewMemory, tuple[NewMemory, ...]]],
    ) -> int:
        """Index the claimed rows ``(seq, index row[, its passages' rows])`` of ``user_id``
        that ``owner`` still holds and mark them done; how many were."""
        full = tuple((i[0], i[1], i[2] if len(i) > 2 else ()) for i in items)
        return cast(int, self._step(CompleteOp(owner, user_id, full)))

    def fail(
        self, owner: str, item: WorkItem, error: str, retry_in: float, max_attempts: int
    ) -> bool:
        """Record a claimed row's failure: due again in ``retry_in`` seconds, or ``failed``
        after ``max_attempts``; False if ``owner`` no longer held it."""
        op = FailOp(owner, item.user_id, item.seq, error, retry_in, max_attempts)
        return cast(bool, self._step(op))

    def release(self, owner: str, seqs: Mapping[str, Sequence[int]], retry_in: float) -> int:
        """Give back claimed rows (``seqs`` per user) uncounted, due in ``retry_in``
        seconds; how many were given back."""
        ops = [ReleaseOp(owner, user, tuple(s), retry_in) for user, s in seqs.items()]
        return sum(cast(list[int], self._store.batch(ops)))

    def renew(
        self,
        owner: str,
        lease: float,
        rows: Iterable[tuple[str, int]] = (),
        summaries: Iterable[tuple[str, str | None]] = (),
        fact_users: Iterable[str] = (),
    ) -> int:
        """Extend the leases ``owner`` still holds (:class:`RenewOp`); how many were."""
        op = RenewOp(owner, lease, tuple(rows), tuple(summaries), tuple(fact_users))
        return cast(int, self._step(op))

    def retry_failed(self, user_id: str, seqs: Sequence[int] | None = None) -> int:
        """Put the user's failed messages (all, or ``seqs``) back in the queue."""
        op = RetryOp(check_user_id(user_id), None if seqs is None else tuple(int(s) for s in seqs))
        return cast(int, self._step(op))

    @stepped
    def work_stats(self, user_id: str | None = None) -> Steps[WorkStats]:
        """Transcript rows pending, done and failed (one user's, or everyone's; the other
        methods here are the worker's, which runs in threads: they have no twin)."""
        op = WorkStatsOp(None if user_id is None else check_user_id(user_id))
        return cast(WorkStats, (yield op))

    awork_stats = stepped_twin(work_stats)

    def queue_stats(self) -> QueueStats:
        """Every user's rows pending (and of them claimed), failed, and the oldest's age."""
        return cast(QueueStats, self._step(QueueStatsOp()))

    def held(self, owner: str) -> dict[str, list[int]]:
        """The pending rows ``owner`` holds under a live lease: seqs per user."""
        return cast("dict[str, list[int]]", self._step(HeldOp(owner)))

    def summary_due(
        self,
        owner: str,
        user_id: str,
        session_id: str | None,
        window: int,
        batch: int,
        lease: float,
    ) -> tuple[SessionSummary, list[TranscriptRow]] | None:
        """Lease the session's summary if ``batch`` messages have left its newest
        ``window``: the summary and the messages to fold in, else None."""
        op = SummaryDueOp(owner, user_id, session_id, window, batch, lease)
        return cast("tuple[SessionSummary, list[TranscriptRow]] | None", self._step(op))

    def save_summary(
        self, owner: str, user_id: str, session_id: str | None, text: str, previous: int, upto: int
    ) -> bool:
        """Write the leased summary covering up to ``upto`` if it still covers ``previous``."""
        op = SaveSummaryOp(owner, user_id, session_id, text, previous, upto)
        return cast(bool, self._step(op))

    def due_fact_sessions(self, batch: int, limit: int) -> list[tuple[str, str | None]]:
        """Up to ``limit`` (user, session) pairs with ``batch`` messages to extract facts from."""
        return cast(list[tuple[str, str | None]], self._step(DueSessionsOp(batch, limit)))

    def facts_due(
        self,
        owner: str,
        user_id: str,
        session_id: str | None,
        batch: int,
        limit: int,
        lease: float,
        force: bool = False,
    ) -> FactsDue | None:
        """Lease the user and return up to ``limit`` of the session's messages after its
        mark, if ``batch`` are waiting (``force``: ignore the retry time)."""
        op = FactsDueOp(owner, user_id, session_id, batch, limit, lease, force)
        return cast("FactsDue | None", self._step(op))

    def fact_mark(self, user_id: str, session_id: str | None) -> FactMark:
        """The session's extraction mark."""
        return cast(FactMark, self._step(FactMarkOp(user_id, session_id)))

    def save_facts(
        self,
        owner: str,
        user_id: str,
        session_id: str | None,
        previous: int,
        upto: int,
        writes: Sequence[FactWrite],
    ) -> list[str] | None:
        """Write the facts and advance the mark if ``owner`` still holds the user; the ids
        written, or None when the lease was lost."""
        op = SaveFactsOp(owner, user_id, session_id, previous, upto, tuple(writes))
        return cast("list[str] | None", self._step(op))

    def facts_fail(
        self, owner: str, user_id: str, session_id: str | None, error: str, retry_in: float
    ) -> bool:
        """Record a failed extraction (the mark stays), due again in ``retry_in`` seconds."""
        op = FactsFailOp(owner, user_id, session_id, error, retry_in)
        return cast(bool, self._step(op))

    def fact_versions(self, user_id: str, memory_id: str) -> list[MemoryRecord]:
        """Every version of the fact ``memory_id`` belongs to, oldest first (no access is
        counted); empty if it is not a fact of the user."""
        op = FactVersionsOp(check_user_id(user_id), memory_id)
        return cast(list[MemoryRecord], self._step(op))
