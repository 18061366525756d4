"""Where a Memory keeps the conversation: the retention modes (``memory.retention``).

``persistent`` (:class:`Persistent`) commits every message to the store's transcript;
the recent window, the running summary and the history are read from the store, so
every process sharing it sees the same. ``session`` (:class:`InProcess`) keeps messages
only in this process's session buffers (facts from ``remember`` are still stored), and
``single_run`` (:class:`SingleRun`) also clears the buffers and the working memory at
``end_run``.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, cast

from tiermem.aio.twins import Call, Calls, Steps, stepped, stepped_twin
from tiermem.buffer.memory import BufferMemory
from tiermem.errors import ConfigError, StoreUnavailableError
from tiermem.memory.wiring import Tiers
from tiermem.messages import Message
from tiermem.stores.ops import Op
from tiermem.stores.transcript import AppendOp, RecentOp, SummaryOp, UnindexedOp
from tiermem.stores.validate import append_op, message_entry
from tiermem.work.archiver import ArchivedMessage, Archiver, transcript_sink, working_sink

log = logging.getLogger(__name__)

RETENTIONS: tuple[str, ...] = ("single_run", "session", "persistent")
ERASE_TIMEOUT = 30.0
"""Seconds a read or an erasure waits for the user's messages queued in process."""
UNINDEXED_LIMIT = 500
"""Newest messages not indexed yet that a context reads: the newest
``memory.planner.pending_vectors`` are embedded with the query, the rest searched by
keyword (the worker normally keeps this to the last second's messages)."""


class Retention(ABC):
    """A retention mode: where messages go and are read from, and the in-process queue of
    messages (:attr:`archiver`) they share.

    Args:
        tiers: the Memory's parts.
        remember: the Memory's ``remember`` (a session's final summary is stored with it).
    """

    def __init__(self, tiers: Tiers, remember: Callable[..., str]) -> None:
        self.tiers = tiers
        self._remember = remember
        self._archiver: Archiver | None = None

    @property
    def archiver(self) -> Archiver:
        """The in-process queue of messages (built on first use)."""
        if self._archiver is None:
            with self.tiers.lock:
                if self._archiver is None:
                    self.tiers.check_open()
                    self._archiver = self._new_archiver()
        return self._archiver

    @property
    def queued(self) -> Archiver | None:
        """The queue if it was built (else nothing is queued)."""
        return self._archiver

    @abstractmethod
    def _new_archiver(self) -> Archiver: ...

    @abstractmethod
    def record(
        self, user_id: str, session_id: str | None, messages: list[Message], agent_id: str | None
    ) -> None:
        """Keep checked messages of a session (all or none)."""

    @abstractmethod
    def session_state(
        self, user_id: str, session_id: str | None, window: int
    ) -> tuple[list[Message], str | None]:
        """The session's newest ``window`` messages and its running summary (one read)."""

    @abstractmethod
    def recent(self, user_id: str, session_id: str | None, limit: int) -> list[Message]:
        """The session's newest ``limit`` messages, oldest first."""

    @abstractmethod
    async def arecent(self, user_id: str, session_id: str | None, limit: int) -> list[Message]:
        """Async twin of :meth:`recent`."""

    @abstractmethod
    def history(self, user_id: str, session_id: str | None) -> list[Message]:
        """Every message of the session in the order added."""

    @abstractmethod
    def message(self, user_id: str, message_id: str) -> Message | None:
        """The user's message with this id, whole; None if the user has none."""

    @abstractmethod
    async def amessage(self, user_id: str, message_id: str) -> Message | None:
        """Async twin of :meth:`message`."""

    @abstractmethod
    def forget_messages(self, user_id: str, ids: list[str]) -> int:
        """Delete these messages of the user; how many went."""

    @abstractmethod
    def forget_session(self, user_id: str, session_id: str | None) -> int:
        """Delete a session's messages and summary; how many messages went."""

    @abstractmethod
    def end_session(self, user_id: str, session_id: str | None) -> str | None:
        """Fold every message of the session into its summary; the summary."""

    @abstractmethod
    def extract_facts(self, user_id: str, session_id: str | None) -> list[str]:
        """Extract facts from the session's messages not read yet; the facts' ids."""

    @property
    def commits_messages(self) -> bool:
        """Whether added messages are committed to the store before ``add`` returns."""
        return False

    def commit(self, ops: Iterable[AppendOp]) -> None:
        """Write appends in one transaction, all or none, and wake the worker."""
        _ = self.tiers.embedder  # a store of another dimension is refused before any write
        self.tiers.store.batch(list(ops))
        self.tiers.worker.wake()

    def _queue(
        self,
        user_id: str,
        session_id: str | None,
        messages: list[Message],
        agent_id: str | None,
        previous: str | None,
        then: Callable[[], None] = lambda: None,
    ) -> None:
        """Check every message, run ``then``, and queue them (each after ``previous``)."""
        limit = self.tiers.max_chars()
        entries = []
        for i, message in enumerate(messages):
            field = "message" if len(messages) == 1 else f"messages[{i}]"
            entries.append(message_entry(message, previous, agent_id, field, limit))
            previous = message.message_id
        then()
        self.archiver.submit(
            ArchivedMessage(user_id, e.message, session_id, agent_id, e.previous_id)
            for e in entries
        )

    def settle(self) -> None:
        """Wait (up to :data:`ERASE_TIMEOUT`) for queued messages to reach their place."""
        if self._archiver is not None:
            self._archiver.flush(ERASE_TIMEOUT)

    def discard_user(self, user_id: str) -> None:
        """Drop the user's queued messages, and let a batch of theirs in flight land.

        Raises:
            StoreUnavailableError: the batch did not land in :data:`ERASE_TIMEOUT`.
        """
        archiver = self._archiver
        if archiver is None:
            return
        archiver.discard_user(user_id)
        if not archiver.flush(ERASE_TIMEOUT):
            raise StoreUnavailableError(
                f"cannot erase user {user_id!r}: the store has not accepted writes for "
                f"{ERASE_TIMEOUT:.0f} s ({archiver.last_error}); nothing was erased, "
                "retry when it is back"
            )

    def flush(self, timeout: float | None) -> bool:
        """Wait for the queue, the store's pending work and the caches; False on timeout."""
        done = self._archiver.flush(timeout) if self._archiver is not None else True
        done = self._flush_work(timeout) and done
        return self.tiers.flush(timeout) and done

    def _flush_work(self, timeout: float | None) -> bool:
        return True

    def end_run(self) -> None:
        """The end of a run (:class:`SingleRun` forgets the conversation)."""
        return None

    def context_reads(self, user_id: str, session_id: str | None, window: int) -> list[Op]:
        """The store reads a context makes for the conversation (run in one batch, sync
        or async, with the retriever's own); :meth:`context_state` shapes their results."""
        return []

    def context_state(
        self, user_id: str, session_id: str | None, window: int, found: list[Any]
    ) -> tuple[list[Message], str | None, list[Any]]:
        """The session's newest ``window`` messages, its running summary and the user's
        newest stored messages not indexed yet, from the results of :meth:`context_reads`."""
        recent, summary = self.session_state(user_id, session_id, window)
        return recent, summary, []

    def buffer(self, user_id: str, session_id: str | None) -> BufferMemory | None:
        """The session's buffer, when messages are kept in process."""
        return None


class Persistent(Calls, Retention):
    """Every message in the store's transcript; the worker embeds and summarizes it."""

    def _new_archiver(self) -> Archiver:
        store = self.tiers.store  # ``memory`` durability; the store's clock, as its worker's
        return Archiver(transcript_sink(store), None, clock=store.clock)

    @property
    def commits_messages(self) -> bool:
        return self.tiers.config.memory.durability != "memory"

    def record(
        self, user_id: str, session_id: str | None, messages: list[Message], agent_id: str | None
    ) -> None:  # committed, or queued under ``memory`` durability
        if self.commits_messages:
            limit = self.tiers.max_chars()
            self.commit([append_op(user_id, session_id, messages, agent_id, None, limit)])
        else:
            self._queue(user_id, session_id, messages, agent_id, None)

    def session_state(
        self, user_id: str, session_id: str | None, window: int
    ) -> tuple[list[Message], str | None]:
        ops: list[Op] = [SummaryOp(user_id, session_id)]
        if window:
            ops.append(RecentOp(user_id, session_id, window))
        found = self.tiers.store.batch(ops)
        return (found[1] if window else []), found[0].text

    def context_reads(self, user_id: str, session_id: str | None, window: int) -> list[Op]:
        return [
            SummaryOp(user_id, session_id),
            RecentOp(user_id, session_id, window),
            UnindexedOp(user_id, UNINDEXED_LIMIT),
        ]

    def context_state(
        self, user_id: str, session_id: str | None, window: int, found: list[Any]
    ) -> tuple[list[Message], str | None, list[Any]]:
        summary, recent, unindexed = found
        return recent, summary.text, list(unindexed)

    @stepped
    def recent(self, user_id: str, session_id: str | None, limit: int) -> Steps[list[Message]]:
        store = self.tiers.store.transcript
        return list((yield Call(store.recent, store.arecent, user_id, session_id, limit)))

    arecent = stepped_twin(recent)

    def history(self, user_id: str, session_id: str | None) -> list[Message]:
        self.settle()
        out: list[Message] = []
        after = 0
        while True:
            rows = self.tiers.store.transcript.rows(
                user_id, session_id=session_id, any_session=False, after=after, limit=1000
            )
            out += [r.message for r in rows]
            if len(rows) < 1000:
                return out
            after = rows[-1].seq

    @stepped
    def message(self, user_id: str, message_id: str) -> Steps[Message | None]:
        queued = self._archiver
        if queued is not None and queued.pending:  # ``memory`` durability: let them land
            yield Call(self.settle, None)
        store = self.tiers.store.transcript
        return cast(
            Message | None, (yield Call(store.message, store.amessage, user_id, message_id))
        )

    amessage = stepped_twin(message)

    def forget_messages(self, user_id: str, ids: list[str]) -> int:
        self.settle()
        return int(self.tiers.store.transcript.forget_messages(user_id, ids))

    def forget_session(self, user_id: str, session_id: str | None) -> int:
        self.settle()
        return int(self.tiers.store.transcript.forget_session(user_id, session_id))

    def end_session(self, user_id: str, session_id: str | None) -> str | None:
        # the summary is kept as a ``summary`` memory (the synopsis reads those)
        self.settle()
        summary = self.tiers.worker.summarize_session(
            user_id, session_id, window=0, batch=1, wait=ERASE_TIMEOUT
        )
        if summary:
            self._remember(summary, user_id, "summary", 0.4, session_id=session_id)
        if self.tiers.config.memory.facts.enabled:
            try:  # a failure is recorded (the messages stay unread): the session still ends
                self.extract_facts(user_id, session_id)
            except Exception as exc:
                log.warning("facts at the end of a session: %s", exc)
        return None if summary is None else str(summary)

    def extract_facts(self, user_id: str, session_id: str | None) -> list[str]:
        facts = self.tiers.worker.facts
        if facts is None:
            raise ConfigError("memory.facts.enabled", "is false", "set it to true to use facts")
        self.settle()
        written: list[str] = []
        while True:
            ids = facts.extract_session(user_id, session_id, force=True)
            if ids is None:
                return written
            written += ids

    def _flush_work(self, timeout: float | None) -> bool:
        return self.tiers.closed or bool(self.tiers.worker.flush(timeout))


class InProcess(Retention):
    """Messages in this process's session buffers (and working memory), not the store."""

    def _new_archiver(self) -> Archiver:
        working = self.tiers.working
        sink = working_sink(working) if working is not None else _discard
        return Archiver(sink, self.tiers.embedder)

    def record(
        self, user_id: str, session_id: str | None, messages: list[Message], agent_id: str | None
    ) -> None:
        buffer = self.tiers.buffers.get(user_id, session_id)
        last = buffer.get_recent(1)
        previous = last[0].message_id if last else None
        self._queue(
            user_id, session_id, messages, agent_id, previous, lambda: buffer.extend(messages)
        )

    def session_state(
        self, user_id: str, session_id: str | None, window: int
    ) -> tuple[list[Message], str | None]:
        buffer = self.buffer(user_id, session_id)
        if buffer is None:
            return [], None
        return (buffer.get_recent(window) if window else []), buffer.summary_now

    def recent(self, user_id: str, session_id: str | None, limit: int) -> list[Message]:
        buffer = self.buffer(user_id, session_id)
        return buffer.get_recent(limit) if buffer is not None else []

    arecent = stepped_twin(recent)  # in process: nothing to wait for

    def history(self, user_id: str, session_id: str | None) -> list[Message]:
        buffer = self.buffer(user_id, session_id)
        return list(buffer.messages) if buffer is not None else []

    def message(self, user_id: str, message_id: str) -> Message | None:
        # only what a buffer still holds (older messages were folded into its summary)
        for key in [k for k in self.tiers.buffers if k[0] == user_id]:
            buffer = self.tiers.buffers.peek(*key)
            for message in buffer.messages if buffer is not None else ():
                if message.message_id == message_id:
                    return message
        return None

    amessage = stepped_twin(message)

    def forget_messages(self, user_id: str, ids: list[str]) -> int:
        gone = set(ids)
        deleted = 0
        for key in [k for k in self.tiers.buffers if k[0] == user_id]:
            buffer = self.tiers.buffers.peek(*key)
            if buffer is None:
                continue
            kept = [m for m in buffer.messages if m.message_id not in gone]
            deleted += len(buffer) - len(kept)
            if len(kept) < len(buffer):
                buffer.flush()  # what left the window is in the summary before it is rebuilt
                summary = buffer.summary
                buffer.clear()
                buffer.extend(kept)
                buffer.summary = summary
        return deleted

    def forget_session(self, user_id: str, session_id: str | None) -> int:
        buffer = self.buffer(user_id, session_id)
        self.tiers.buffers.drop(user_id, session_id, drain=False)
        return len(buffer) if buffer is not None else 0

    def end_session(self, user_id: str, session_id: str | None) -> str | None:
        buffer = self.buffer(user_id, session_id)
        if buffer is None:
            return None
        self.tiers.buffers.drop(user_id, session_id)
        buffer.flush()
        return buffer.summary

    def extract_facts(self, user_id: str, session_id: str | None) -> list[str]:
        retention = self.tiers.config.memory.retention
        raise ConfigError(
            "memory.retention", f"is {retention!r}", "facts need persistent retention"
        )

    def buffer(self, user_id: str, session_id: str | None) -> BufferMemory | None:
        return self.tiers.buffers.peek(user_id, session_id)


class SingleRun(InProcess):
    """:class:`InProcess`, and every buffer and the working memory cleared at ``end_run``."""

    def end_run(self) -> None:
        self.flush(None)
        for user_id, session_id in self.tiers.buffers:
            self.tiers.buffers.drop(user_id, session_id, drain=False)
        working = self.tiers.built_working
        if working is not None:
            working.clear(all_users=True)


def retention_for(tiers: Tiers, remember: Callable[..., str]) -> Retention:
    """The mode ``memory.retention`` names."""
    modes: dict[str, type[Retention]] = {
        "persistent": Persistent,
        "session": InProcess,
        "single_run": SingleRun,
    }
    return modes[tiers.config.memory.retention](tiers, remember)


def _discard(batch: list[ArchivedMessage], vectors: Any) -> None:
    """The sink when nothing outside the buffers keeps messages."""
