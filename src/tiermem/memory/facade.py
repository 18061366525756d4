"""Memory: the facade that wires the tiers together for every user and agent.

``Memory()`` is the embedded default: a SQLite file, local MiniLM embeddings, extractive
summaries and an in-process synopsis cache; no server, no key. The store is the source
of truth: ``add`` commits each message to its transcript (and, without a vector, to the
keyword index) before it returns; a :class:`~tiermem.work.worker.StoreWorker` in any process
sharing the store embeds it and folds what leaves a session's window into the session's
summary. Each public method checks its arguments and hands the work to a part:
:mod:`~tiermem.memory.wiring` builds the tiers, :mod:`~tiermem.memory.retention` keeps the
conversation (in the store, or in process), :mod:`~tiermem.memory.retrieval` gathers a
context's inputs for the planner.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tiermem.aio.twins import Call, Steps, stepped, stepped_twin, twin
from tiermem.errors import (
    ConfigError,
    InputError,
    InvalidTypeError,
    NotFoundError,
    StoreUnavailableError,
)
from tiermem.memory import inputs
from tiermem.memory.access import AccessLog
from tiermem.memory.reading import Reading, reads_natively
from tiermem.memory.retention import RETENTIONS, retention_for
from tiermem.memory.retrieval import Retriever
from tiermem.memory.wiring import Tiers
from tiermem.messages import Content, Message
from tiermem.planner.planner import QueryPlanner
from tiermem.stores.ops import ListOp
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.transcript import AppendOp
from tiermem.stores.validate import append_op
from tiermem.tokens import TokenCounter
from tiermem.types.checks import (
    build_message,
    build_messages,
    check_flag,
    check_importance,
    check_limit,
    check_list,
    check_memory_type,
    check_message_ids,
    check_text_id,
    check_user_id,
    check_uuid,
)
from tiermem.types.records import MemoryRecord, StoreStats
from tiermem.types.transcript import SessionInfo
from tiermem.work.archiver import Archiver

if TYPE_CHECKING:
    from tiermem.api import AsyncMemoryAPI, MemoryAPI
    from tiermem.types.synopsis import Synopsis


class Memory(Reading):
    """Tiered memory for many users and agents.

    Args:
        path: SQLite file of the embedded store (default: ``memory.persistent.path``).
        config: a :class:`~tiermem.config.model.TiermemConfig`, or what ``TiermemConfig.load``
            takes (a YAML path, YAML text or a dict); default: the embedded setup.
        store: a :class:`~tiermem.stores.MemoryStore` to use instead of the configured one.
        embedder: an Embedder or a model string instead of the configured model.
        llm: an LLM (or model string) for summaries and synopses instead of the configured
            chat model; none means offline (extractive) summaries and synopses.
        summarizer: what summarizes messages that leave a buffer.
        token_counter: counts context tokens (default: exact, by the chat model's encoding).
        synopsis: a :class:`~tiermem.synopsis.SynopsisService` instead of the configured one.

    A store or synopsis service given here stays open after :meth:`close` (it may be
    shared); what Memory builds itself, it closes.

    Retention (``memory.retention``): ``persistent`` writes every message to the store;
    ``session`` keeps messages only in this process's buffers (facts from ``remember`` are
    still stored); ``single_run`` also clears the buffers at :meth:`end_run`.

    Durability (``memory.durability``, persistent retention; docs/stores.md, "Durability"):
    ``committed`` (default) — ``add`` returns once the message is committed, so it survives
    the death of any process, the database server's included; ``synced`` — once it is on
    disk, so it survives a power loss too; ``async_commit`` — before PostgreSQL flushed it
    (a crash of the database server may lose the last moments; on SQLite, ``committed``);
    ``memory`` — messages are queued in process and written in batches (bulk loads: a crash
    loses what is queued, :attr:`pending` of them).
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        config: Any = None,
        store: Any = None,
        embedder: Any = None,
        llm: Any = None,
        summarizer: Any = None,
        token_counter: TokenCounter | None = None,
        synopsis: Any = None,
    ) -> None:
        tiers = Tiers(config, path, store, embedder, llm, summarizer, synopsis, token_counter)
        self._tiers = tiers
        self.config = tiers.config
        settings = self.config.memory
        self.retention = settings.retention
        self.durability = settings.durability
        self.token_counter = tiers.token_counter
        self.planner = QueryPlanner(settings.planner, counter=self.token_counter)
        self._keep = retention_for(tiers, self.remember)
        self._retriever = Retriever(
            tiers,
            self._keep,
            settings.planner.recent_messages,
            settings.planner.k,
            settings.planner.follow_up,
            settings.planner.standing,
        )
        self.buffers = tiers.buffers
        self.changes = tiers.changes
        """Where every write reports a change of a user's data (:mod:`tiermem.memory.changes`)."""
        self.unarchived: list[Message] = []
        """Messages a failing store never accepted before :meth:`close` (normally empty)."""

    @classmethod
    def from_config(cls, source: Any, *, secrets_file: str | None = None, **parts: Any) -> Memory:
        """A Memory built from a YAML file, YAML text or dict (see docs/configuration.md).

        ``parts`` are the component overrides of :class:`Memory` (``store=``...).
        """
        from tiermem.config.model import TiermemConfig

        return cls(config=TiermemConfig.load(source, secrets_file=secrets_file), **parts)

    # -- the tiers (built on first use) ---------------------------------------------------

    @property
    def store(self) -> MemoryStore:
        """The long-term store (a SQLite file unless configured or given otherwise)."""
        return self._tiers.store

    @property
    def embedder(self) -> Any:
        """The embedder (built on first use: loading a local model takes seconds)."""
        return self._tiers.embedder

    @property
    def llm(self) -> Any:
        """The chat model for summaries and synopses, or None (offline)."""
        return self._tiers.llm

    @property
    def working(self) -> Any:
        """The in-process working memory (None when ``memory.working.enabled`` is false)."""
        return self._tiers.working

    @property
    def synopses(self) -> Any:
        """The synopsis service (None when ``memory.synopsis.enabled`` is false)."""
        return self._tiers.synopses

    @property
    def worker(self) -> Any:
        """The :class:`~tiermem.work.worker.StoreWorker` that embeds and summarizes the store's
        pending work (shared with every process using the same store)."""
        return self._tiers.worker

    @property
    def accesses(self) -> AccessLog:
        """Counts of the memories each context used, written to the store off the hot path."""
        return self._tiers.accesses

    @property
    def archiver(self) -> Archiver:
        """The in-process queue of messages: to the store under ``memory`` durability, to
        the working memory when retention keeps nothing in the store."""
        return self._keep.archiver

    # -- writing ---------------------------------------------------------------------------

    def add(
        self,
        /,
        role: str,
        content: Content,
        user_id: str,
        session_id: str | None = None,
        timestamp: Any = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        agent_id: str | None = None,
        **fields: Any,
    ) -> Message:
        """Add one message of a conversation; never waits on a model.

        With persistent retention the message is committed to the store before this
        returns (see ``memory.durability``): findable by keyword and in the recent window
        at once, by vector once a worker has embedded it. Other :class:`Message` fields
        (``name``, ``tool_calls``...) go in ``fields``.

        Raises:
            InputError: (a subclass of it) naming the field, for anything the store could
                not hold: empty content, ids over 255 characters or with NUL, metadata
                with NaN or non-str keys, a lone surrogate, a timestamp out of range.
            StoreUnavailableError: the store did not take the message (nothing was added).
        """
        message = build_message(role, content, user_id, session_id, timestamp, metadata, fields)
        self._record(user_id, session_id, [message], agent_id)
        return message

    def add_messages(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        user_id: str,
        session_id: str | None = None,
        *,
        agent_id: str | None = None,
    ) -> list[Message]:
        """Import a history (Message objects, or dicts with their own ``timestamp``) in one
        transaction: all messages are validated before any is added, and all or none are.
        """
        batch = build_messages(messages, user_id, session_id)
        self._record(user_id, session_id, batch, agent_id)
        return batch

    def _record(
        self, user_id: str, session_id: str | None, messages: list[Message], agent_id: str | None
    ) -> None:
        self._tiers.check_open()
        check_text_id(agent_id, "agent_id")
        self._keep.record(user_id, session_id, messages, agent_id)
        self.changes.changed(user_id, "messages")

    @property
    def commits_messages(self) -> bool:
        """Whether added messages are committed to the store before the call returns
        (persistent retention without ``memory`` durability): then
        :meth:`stage_messages` and :meth:`commit_staged` may be used."""
        return self._keep.commits_messages

    @property
    def native_async(self) -> bool:
        """Whether the async reads (:meth:`aget_context`, :meth:`asearch`...) take the
        store's own async path (PostgreSQL with ``memory.persistent.native_async``: a
        context's reads in one round trip from the thread that plans it) instead of the
        sync method in a thread. False until the store is built (on first use)."""
        return self._tiers.native_async

    def stage_messages(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        user_id: str,
        session_id: str | None = None,
        *,
        agent_id: str | None = None,
    ) -> tuple[list[Message], AppendOp]:
        """Validate what :meth:`add_messages` takes, without writing: the messages and
        the write that :meth:`commit_staged` runs, with other stages in one transaction
        (a server coalescing concurrent requests). No I/O; raises what ``add_messages``
        raises for bad input, and ConfigError unless :attr:`commits_messages`."""
        self._tiers.check_open()
        if not self.commits_messages:
            raise ConfigError(
                "memory.durability", "messages are not committed at once", "use add_messages"
            )
        batch = build_messages(messages, user_id, session_id)
        op = append_op(user_id, session_id, batch, agent_id, None, self._tiers.max_chars())
        return batch, op

    def commit_staged(self, ops: Iterable[AppendOp]) -> None:
        """Write staged messages (:meth:`stage_messages`) in one transaction, all or none,
        and wake the worker that embeds them."""
        self._tiers.check_open()
        self._keep.commit(ops)

    def remember(
        self,
        content: str,
        user_id: str,
        memory_type: str = "fact",
        importance: float = 0.5,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Store a fact, preference or other memory now; returns its id."""
        self._open(user_id)
        inputs.memory_content(content, self._tiers.memory_chars())
        check_memory_type(memory_type)  # named as the arguments, before the embedder runs
        check_importance(importance)
        vector = self._embed(content)
        memory_id = self.store.index.add(
            user_id,
            content,
            embedding=vector,
            memory_type=memory_type,
            importance=importance,
            session_id=session_id,
            agent_id=agent_id,
            metadata=metadata,
        )
        self.changes.changed(user_id, "memories", memory_type)
        return str(memory_id)

    def remember_many(self, memories: Iterable[Mapping[str, Any]], user_id: str) -> list[str]:
        """Store several memories in one transaction, all or none; their ids, in order.

        Each item is a dict of :meth:`remember`'s arguments (``content``, ``memory_type``,
        ``importance``, ``session_id``, ``agent_id``, ``metadata``) and may give
        ``created_at`` (when it happened; default now). The contents are embedded in one
        batch; a content the user already has gives the existing memory's id.

        Raises:
            InputError: (a subclass of it) naming the item and field, for an empty list, an
                unknown field or a value the store cannot hold; nothing is stored.
        """
        self._open(user_id)
        items = inputs.new_memories(memories, self._tiers.memory_chars())
        vectors = self._tiers.embed([m.content for m in items])
        ids = self.store.index.add_many(user_id, items, embeddings=vectors)
        if self.synopses is not None:
            for memory_type in {m.memory_type for m in items}:
                self.synopses.memory_added(user_id, memory_type)
        return [str(i) for i in ids]

    def synopsis(self, user_id: str) -> Synopsis:
        """The user's :class:`~tiermem.synopsis.Synopsis` (cached at the user's current
        change generation; generated on a miss)."""
        user_id = self._synopsis_user(user_id)
        found: Synopsis = self.synopses.get(user_id, generation=self._tiers.generation(user_id))
        return found

    def generate_synopsis(self, user_id: str) -> Synopsis:
        """Regenerate and cache the user's synopsis now (seed 001's ``generate_synopsis``)."""
        user_id = self._synopsis_user(user_id)
        generation = self._tiers.generation(user_id)
        made: Synopsis = self.synopses.generate_synopsis(user_id, generation=generation)
        return made

    def _synopsis_user(self, user_id: str) -> str:
        self._tiers.check_open()
        if self.synopses is None:
            raise ConfigError("memory.synopsis.enabled", "is false", "enable it to use synopses")
        return check_user_id(user_id)

    # -- export and import ---------------------------------------------------------------

    def export(self, user_id: str, *, include_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """The user's archive (docs/export.md), one dict per JSON line, read from the
        store page by page: transcript, summaries, fact marks, memories (facts with every
        version), with their vectors when ``include_vectors``."""
        from tiermem.memory.export import archive_lines

        user_id = self._open(user_id)
        if not isinstance(include_vectors, bool):
            raise InvalidTypeError("include_vectors", "must be a bool")
        self._keep.settle()
        embedder = self.embedder
        return archive_lines(
            self.store,
            user_id,
            model=str(embedder.model_id),
            dimension=int(embedder.dimension),
            include_vectors=include_vectors,
        )

    def import_archive(
        self, archive: Iterable[str | bytes | Mapping[str, Any]], user_id: str | None = None
    ) -> dict[str, int]:
        """Restore an archive of :meth:`export` (JSON lines, as text or dicts), as its own
        user or as ``user_id``; what was added, by kind. Importing it again adds nothing.

        Every line is checked before anything is written, and everything is written in
        one transaction: a damaged or foreign archive raises an InputError naming the line
        (``line 7.content``) and leaves the store as it was. Vectors of another model
        than this Memory's embedder are not used: the memories are embedded again.
        """
        from tiermem.memory.export import read_archive

        self._tiers.check_open()
        check_list(archive, "archive", "an iterable of lines", "pass open(path) or a list of lines")
        restore = read_archive(archive, None if user_id is None else check_user_id(user_id))
        added, rows = self.store.batch(restore.ops(self.embedder, self.store.dimension))
        self.changes.changed(restore.user_id, "imported")
        if rows:
            self.worker.wake()
        return {"messages": int(rows), "memories": int(added)}

    def update_memory(
        self,
        memory_id: str,
        user_id: str,
        *,
        content: str | None = None,
        memory_type: str | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord:
        """Change a memory's content (embedded again), type, importance or metadata.

        Raises:
            InputError: nothing to change, or a value the store cannot hold.
            NotFoundError: the user has no memory with this id.
        """
        user_id = self._open(user_id)
        changes: dict[str, Any] = {
            "content": content,
            "memory_type": memory_type,
            "importance": importance,
            "metadata": metadata,
        }
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            raise InputError(
                "changes", "is empty", "give content, memory_type, importance or metadata"
            )
        if content is not None:
            content = inputs.memory_content(content, self._tiers.memory_chars())
            changes["embedding"] = self._embed(content)
        record: MemoryRecord = self.store.index.update(user_id, memory_id, **changes)
        self.changes.changed(user_id, "memories")
        return record

    def stats(self, user_id: str) -> StoreStats:
        """Counts per type, time span, access and importance figures of the user."""
        user_id = self._open(user_id)
        return self.store.index.stats(user_id)

    # -- forgetting and lifecycle ---------------------------------------------------------

    def forget(self, memory_id: str, user_id: str) -> bool:
        """Delete one memory of ``user_id``; False if it does not exist (or is another's)."""
        user_id = self._open(user_id)
        deleted = bool(self.store.index.delete(user_id, memory_id))
        if deleted:
            self.changes.changed(user_id, "forgotten")
        return deleted

    def forget_user(self, user_id: str) -> int:
        """Erase everything of ``user_id``: transcript, summaries, index, pending work,
        buffers, working memory and cached synopsis. Returns the number of long-term
        memories deleted.

        The store's part is one transaction: all of it is erased, or (when the store is
        down) nothing is, and :class:`StoreUnavailableError` says so; the in-process caches
        are cleared only once the store's part is done.
        """
        self._open(user_id)
        self._keep.discard_user(user_id)
        try:
            deleted = int(self.store.index.delete_user(user_id))
        except StoreUnavailableError as exc:
            raise StoreUnavailableError(
                f"cannot erase user {user_id!r}: {exc}; nothing was erased, retry when the "
                "store is back"
            ) from exc
        self.changes.changed(user_id, "erased")
        return deleted

    def end_session(self, user_id: str, session_id: str | None = None) -> str | None:
        """Close a session: every message of it is folded into its running summary.

        The final summary is returned and, with ``persistent`` retention, kept in the
        long-term store as a ``summary`` memory of the session (the synopsis reads those).
        None when the session has no message left to summarize.
        """
        self._check_session(user_id, session_id)
        return self._keep.end_session(user_id, session_id)

    def _check_session(self, user_id: str, session_id: str | None) -> None:
        self._open(user_id)
        check_text_id(session_id, "session_id")

    # -- facts from conversations ----------------------------------------------------------

    def extract_facts(self, user_id: str, session_id: str | None = None) -> list[str]:
        """Extract facts from the session's messages not read yet, now (in batches of
        ``memory.facts.max_batch``); the ids of the facts written or merged.

        Raises the extractor's error (the LLM is down...) after recording it; the
        messages stay due and are read again later.
        """
        self._check_session(user_id, session_id)
        return self._keep.extract_facts(user_id, session_id)

    def facts(self, user_id: str, *, current: bool = True, limit: int = 1000) -> list[MemoryRecord]:
        """The user's facts extracted from conversations (the current versions, or every
        version with ``current=False``), newest first."""
        from tiermem.facts.worker import CURRENT

        user_id = self._open(user_id)
        flt = CURRENT if check_flag(current, "current") else CURRENT._replace(metadata=None)
        records = self.store.batch([ListOp(user_id, flt, check_limit(limit))])[0]
        return [r for r in records if current or "claim" in (r.metadata or {})]

    def fact_history(self, memory_id: str, user_id: str) -> list[MemoryRecord]:
        """Every version of a fact, oldest first: superseded versions keep their text and
        say until when they held (``metadata["valid_until"]``)."""
        user_id = self._open(user_id)
        versions = self.store.queue.fact_versions(user_id, str(check_uuid(memory_id)))
        if not versions:
            raise NotFoundError(f"fact {memory_id} not found for this user_id")
        return versions

    # -- the conversation ------------------------------------------------------------------

    @stepped
    def recent(
        self, user_id: str, session_id: str | None = None, limit: int = 20
    ) -> Steps[list[Message]]:
        """The newest ``limit`` messages of a session, oldest first (from the store with
        persistent retention, so every process sharing it sees the same; async: no
        thread on PostgreSQL)."""
        self._check_session(user_id, session_id)
        keep, limit = self._keep, check_limit(limit)
        return list((yield Call(keep.recent, keep.arecent, user_id, session_id, limit)))

    arecent = stepped_twin(recent, threads_unless=reads_natively)

    def session_summary(self, user_id: str, session_id: str | None = None) -> str | None:
        """The running summary of the session's messages older than the recent window
        (what :meth:`get_context` offers as the summary), or None while there is none."""
        self._check_session(user_id, session_id)
        return self._keep.session_state(user_id, session_id, 0)[1]

    def history(self, user_id: str, session_id: str | None = None) -> list[Message]:
        """Every message of a session in the order added, whole (tool calls, ids, metadata),
        repeated lines included."""
        self._check_session(user_id, session_id)
        return self._keep.history(user_id, session_id)

    def forget_messages(self, user_id: str, message_ids: Iterable[str]) -> int:
        """Delete these messages of the user (by message id) from the transcript and the
        index (an index line another message still says stays); how many went."""
        self._open(user_id)
        deleted = self._keep.forget_messages(user_id, check_message_ids(message_ids))
        self.changes.changed(user_id, "forgotten")
        return deleted

    def forget_session(self, user_id: str, session_id: str | None = None) -> int:
        """Delete a session: its messages, its summary and the index lines only it said."""
        self._check_session(user_id, session_id)
        deleted = self._keep.forget_session(user_id, session_id)
        self.changes.changed(user_id, "forgotten")
        return deleted

    @stepped
    def sessions(self, user_id: str) -> Steps[list[SessionInfo]]:
        """The user's sessions in the store, most recently active first (async: no thread
        on PostgreSQL)."""
        user_id = self._open(user_id)
        store = self.store.transcript
        return list((yield Call(store.sessions, store.asessions, user_id)))

    asessions = stepped_twin(sessions, threads_unless=reads_natively)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async twins (the same signatures, run in a thread) ------------------------------

    aadd = twin(add)
    aadd_messages = twin(add_messages)
    acommit_staged = twin(commit_staged)
    aremember = twin(remember)
    aremember_many = twin(remember_many)
    aupdate_memory = twin(update_memory)
    asession_summary = twin(session_summary)
    ahistory = twin(history)
    asynopsis = twin(synopsis)
    agenerate_synopsis = twin(generate_synopsis)
    afacts = twin(facts)
    afact_history = twin(fact_history)
    astats = twin(stats)
    aforget = twin(forget)
    aforget_messages = twin(forget_messages)
    aforget_session = twin(forget_session)
    aforget_user = twin(forget_user)
    aend_session = twin(end_session)
    aextract_facts = twin(extract_facts)
    aimport_archive = twin(import_archive)

    async def aexport(
        self, user_id: str, *, include_vectors: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        """Async twin of :meth:`export`: the archive's lines read in threads, a page at a time."""
        lines = await asyncio.to_thread(self.export, user_id, include_vectors=include_vectors)
        while page := await asyncio.to_thread(list, itertools.islice(lines, 256)):
            for line in page:
                yield line


if TYPE_CHECKING:  # mypy checks that Memory implements the whole contract, both halves

    def _implements(memory: Memory) -> tuple[MemoryAPI, AsyncMemoryAPI]:
        return memory, memory


__all__ = ["RETENTIONS", "Memory"]
