"""Memory: the facade that wires the tiers together for every user and agent.

``Memory()`` is the embedded default: a SQLite file, local MiniLM embeddings, extractive
summaries and an in-process synopsis cache; no server, no key. The store is the source
of truth: ``add`` commits each message to its transcript (and, without a vector, to the
keyword index) before it returns; a :class:`~tiermem.worker.StoreWorker` in any process
sharing the store embeds it and folds what leaves a session's window into the session's
summary. The recent window and summary of a session are read from the store, so every
process sees the same ones. With ``session`` or ``single_run`` retention nothing goes to
the store: per-session buffers in process hold the conversation.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tiermem.access import AccessLog
from tiermem.archiver import ArchivedMessage, Archiver, transcript_sink, working_sink
from tiermem.buffer import BufferMemory, BufferRegistry
from tiermem.changes import Changes
from tiermem.config import Retention
from tiermem.embeddings.base import DEFAULT_MAX_CHARS
from tiermem.errors import (
    ClosedError,
    ConfigError,
    DimensionMismatchError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    NotFoundError,
    StoreUnavailableError,
    TiermemError,
)
from tiermem.messages import Content, Message, check_fields, transcript_line
from tiermem.paths import sqlite_file
from tiermem.planner import Candidate, Context, QueryPlanner, candidate_key
from tiermem.stores.ops import SEARCH_FILTERS, ListOp
from tiermem.stores.queue import WorkStats
from tiermem.stores.records import MemoryRecord, NewMemory, SearchResult, StoreStats
from tiermem.stores.transcript import (
    AppendOp,
    GenerationOp,
    RecentOp,
    SessionInfo,
    SummaryOp,
    TranscriptRow,
    UnindexedOp,
)
from tiermem.stores.validate import (
    MAX_CONTENT_CHARS,
    MAX_LIMIT,
    append_op,
    check_content,
    check_encodable,
    check_limit,
    check_text_id,
    check_user_id,
    check_uuid,
    check_vector,
    message_entry,
)
from tiermem.tokens import TokenCounter, get_token_counter
from tiermem.twins import twin

if TYPE_CHECKING:
    from tiermem.api import AsyncMemoryAPI, MemoryAPI
    from tiermem.synopsis import Synopsis

log = logging.getLogger(__name__)

RETENTIONS: tuple[str, ...] = ("single_run", "session", "persistent")
_MESSAGE_FIELDS = frozenset(
    {"message_id", "name", "tool_calls", "tool_call_id", "agent_calls", "structured_data", "images"}
)
PROFILE_TYPES = ("fact", "preference", "context", "summary")
UNINDEXED_LIMIT = 500
"""Newest messages not indexed yet that a context reads: the newest
``memory.planner.pending_vectors`` are embedded with the query, the rest searched by
keyword (the worker normally keeps this to the last second's messages)."""
log = logging.getLogger(__name__)
ERASE_TIMEOUT = 30.0
"""Seconds forget_user waits for a batch of the user's messages already being written."""


def _user(user_id: Any) -> str:
    """``user_id`` checked: MissingUserError if absent or blank, InvalidTypeError if not a str."""
    return check_user_id(user_id)


class Memory:
    """Tiered memory for many users and agents.

    Args:
        path: SQLite file of the embedded store (default: ``memory.persistent.path``).
        config: a :class:`~tiermem.config.TiermemConfig`, or what ``TiermemConfig.load``
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
        from tiermem.config import TiermemConfig
        from tiermem.stores.protocol import MemoryStore

        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise InvalidTypeError("path", f"expected a file path, got {type(path).__name__}")
        if store is not None and not isinstance(store, MemoryStore):
            raise InvalidTypeError(
                "store",
                f"expected a MemoryStore, got {type(store).__name__}",
                "pass SQLiteStore(...) or PostgresStore(...), or a path as the first argument",
            )
        self.config = config if isinstance(config, TiermemConfig) else TiermemConfig.load(config)
        settings = self.config.memory
        self.retention: Retention = settings.retention
        self.durability = settings.durability
        self._path = None if path is None else sqlite_file(path, "path")
        self._store = store
        self._owns_store = store is None  # close() releases only what Memory built
        self._embedder_spec = embedder
        self._embedder: Any = None
        self._llm_spec = llm
        self._llm: Any = None
        self._summarizer = summarizer
        self.token_counter = token_counter or get_token_counter(self.config.chat_model)
        self.planner = QueryPlanner(settings.planner, counter=self.token_counter)
        self._working: Any = None
        self._synopsis = synopsis
        self._owns_synopsis = synopsis is None
        self._archiver: Archiver | None = None
        self._worker: Any = None
        self._accesses: AccessLog | None = None
        self._searches: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()
        self._closed = False
        self.buffers = BufferRegistry(self._new_buffer)
        self.changes = Changes(self._cached_parts)
        """Where every write reports a change of a user's data (see :mod:`tiermem.changes`)."""
        self.unarchived: list[Message] = []
        """Messages a failing store never accepted before :meth:`close` (normally empty)."""
        self._preload_model()

    @classmethod
    def from_config(cls, source: Any, *, secrets_file: str | None = None, **parts: Any) -> Memory:
        """A Memory built from a YAML file, YAML text or dict (see docs/configuration.md).

        ``parts`` are the component overrides of :class:`Memory` (``store=``...).
        """
        from tiermem.config import TiermemConfig

        return cls(config=TiermemConfig.load(source, secrets_file=secrets_file), **parts)

    # -- lazily built tiers --------------------------------------------------------------

    @property
    def embedder(self) -> Any:
        """The embedder (built on first use: loading a local model takes seconds)."""
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    from tiermem.embeddings import get_embedder

                    spec = self._embedder_spec or self.config.embedding_model
                    options = {}
                    if isinstance(spec, str) and spec.startswith("openai/"):
                        options = self.config.llm.provider_options()
                    embedder = get_embedder(spec, **options)
                    if self._store is not None:
                        _check_dimension(self._store, embedder)
                    self._embedder = embedder
        return self._embedder

    def _preload_model(self) -> None:
        """Start loading a local embedding model in a background thread: the first context
        or add needs it, and meanwhile the store opens and the keyword search runs (the cold
        start, docs/benchmarks.md). A failure here is raised again where the model is used."""
        spec = self._embedder_spec or self.config.embedding_model
        if isinstance(spec, str) and spec.startswith("local/"):
            # not a daemon: a process that exits at once waits for the load instead of
            # killing onnxruntime mid-load (an abort at exit)
            threading.Thread(target=self._preload, name="tiermem-preload").start()

    def _preload(self) -> None:
        try:
            preload = getattr(self.embedder, "preload", None)
            if preload is not None:
                preload()
        except Exception as exc:  # the same error is raised where the model is first used
            log.debug("preloading the embedding model failed: %s", exc)

    @property
    def llm(self) -> Any:
        """The chat model for summaries and synopses, or None (offline)."""
        spec = self._llm_spec or self.config.chat_model
        if self._llm is None and spec is not None:
            with self._lock:
                if self._llm is None:
                    from tiermem.llm import get_llm

                    options = self.config.llm.provider_options()
                    self._llm = get_llm(spec, **options) if isinstance(spec, str) else spec
        return self._llm

    @property
    def store(self) -> Any:
        """The long-term store (a SQLite file unless configured or given otherwise)."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = self._build_store()
        return self._store

    def _build_store(self) -> Any:
        persistent = self.config.memory.persistent
        if persistent.provider == "postgresql" and persistent.enabled:
            from tiermem.stores.postgres import PostgresStore

            assert persistent.connection_string is not None  # checked by the config
            return PostgresStore(
                persistent.connection_string.get_secret_value(),
                dimension=self.embedder.dimension,
                embedder=self.embedder,
                durability=self._store_durability,
                timeout=persistent.connect_timeout,
            )
        from tiermem.stores import SQLiteStore

        path = self._path or (str(persistent.path) if persistent.enabled else ":memory:")
        return SQLiteStore(
            path,
            dimension=self.embedder.dimension,
            embedder=self.embedder,
            durability=self._store_durability,
        )

    @property
    def _store_durability(self) -> str:
        return "committed" if self.durability == "memory" else self.durability

    @property
    def _stored(self) -> bool:
        """Whether messages go to the store (persistent retention)."""
        return self.retention == "persistent"

    @property
    def working(self) -> Any:
        """The in-process working memory (None when ``memory.working.enabled`` is false)."""
        settings = self.config.memory.working
        if self._working is None and settings.enabled:
            with self._lock:
                if self._working is None:
                    from tiermem.working import WorkingMemory

                    self._working = WorkingMemory(
                        embedder=self.embedder,
                        max_memory_mb=settings.max_memory_mb,
                        fifo_interval_min=settings.fifo_interval_min,
                        user_isolation=True,
                    )
        return self._working

    @property
    def synopses(self) -> Any:
        """The synopsis service (None when ``memory.synopsis.enabled`` is false)."""
        settings = self.config.memory.synopsis
        if self._synopsis is None and settings.enabled:
            with self._lock:
                if self._synopsis is None:
                    from tiermem.synopsis import (
                        SynopsisGenerator,
                        SynopsisService,
                        cache_from_config,
                    )

                    self._synopsis = SynopsisService(
                        cache_from_config(settings),
                        SynopsisGenerator(self.llm, max_items=settings.max_items),
                        refresh_on_access=settings.refresh_on_access,
                        fetch_memories=self._profile_memories,
                    )
        return self._synopsis

    def _cached_parts(self) -> dict[str, Any]:
        """What :attr:`changes` invalidates: the caches built so far (the synopsis service
        is built, so a shared cache's entries are deleted even if this process read none)."""
        return {
            "synopses": self.synopses,
            "working": self._working,
            "accesses": self._accesses,
            "buffers": self.buffers,
            "context": self._worker.context if self._worker is not None else None,
        }

    def _generation(self, user_id: str) -> int:
        """The user's change generation in the store (see :mod:`tiermem.changes`)."""
        return int(self.store.batch([GenerationOp(user_id)])[0])

    def _profile_memories(self, user_id: str) -> list[Any]:
        """What a synopsis is written from: the user's facts, preferences and context
        (current versions only: a superseded fact is history, not a profile)."""
        from tiermem.stores.facts import current

        found = self.store.list(user_id, limit=200, memory_type=list(PROFILE_TYPES))
        return [r for r in found if current(r.metadata)]

    @property
    def archiver(self) -> Archiver:
        """The in-process queue of messages: to the store under ``memory`` durability, to
        the working memory when retention keeps nothing in the store."""
        if self._archiver is None:
            with self._lock:
                if self._archiver is None:
                    self._check_open()
                    if self._stored:
                        self._archiver = Archiver(transcript_sink(self.store), None)
                        return self._archiver
                    sink = working_sink(self.working) if self.working is not None else _discard
                    self._archiver = Archiver(sink, self.embedder)
        return self._archiver

    @property
    def worker(self) -> Any:
        """The :class:`~tiermem.worker.StoreWorker` that embeds and summarizes the store's
        pending work (shared with every process using the same store)."""
        if self._worker is None:
            with self._lock:
                if self._worker is None:
                    self._check_open()
                    from tiermem.worker import StoreWorker

                    settings = self.config.memory.buffer
                    work = self.config.memory.worker
                    self._worker = StoreWorker(
                        self.store,
                        self.embedder,
                        self._new_summarizer,
                        window=settings.size,
                        summary_batch=min(settings.summary_batch, settings.size),
                        batch_size=work.batch_size,
                        lease=work.lease_seconds,
                        max_attempts=work.max_attempts,
                        retry_backoff=work.retry_backoff,
                        delay=work.delay,
                        background=work.background,
                        facts=self._new_fact_worker(),
                    )
        return self._worker

    def _new_fact_worker(self) -> Any:
        """The fact extractor's worker when ``memory.facts.enabled`` (else None)."""
        settings = self.config.memory.facts
        if not settings.enabled:
            return None
        from tiermem.facts import FactWorker

        use_llm = self._uses_llm(settings.extractor, "memory.facts.extractor", "offline")

        def extractor() -> Any:
            from tiermem.extract import LLMExtractor, OfflineExtractor

            if use_llm:
                return LLMExtractor(self.llm, structured=settings.structured)
            return OfflineExtractor()

        return FactWorker(
            self.store,
            self.embedder,
            extractor,
            batch=settings.batch,
            max_batch=settings.max_batch,
            lease=settings.lease_seconds,
            concurrency=settings.concurrency,
            retry_backoff=settings.retry_backoff,
            max_backoff=settings.max_backoff,
            related=settings.related,
            sweep_interval=settings.sweep_seconds,
        )

    @property
    def accesses(self) -> AccessLog:
        """Counts of the memories each context used, written to the store off the hot path."""
        if self._accesses is None:
            with self._lock:
                if self._accesses is None:
                    self._check_open()
                    self._accesses = AccessLog(self.store)
        return self._accesses

    def _search_pool(self) -> ThreadPoolExecutor:
        """Threads that search the store while the caller embeds the query."""
        if self._searches is None:
            with self._lock:
                if self._searches is None:
                    self._check_open()
                    self._searches = ThreadPoolExecutor(4, thread_name_prefix="tiermem-search")
        return self._searches

    def _new_summarizer(self) -> Any:
        """The summarizer of sessions: the one given, else by ``memory.buffer.summarizer``."""
        from tiermem.summarize import ExtractiveSummarizer, MemorySummarizer

        if self._summarizer is not None:
            return self._summarizer
        settings = self.config.memory.buffer
        use_llm = self._uses_llm(settings.summarizer, "memory.buffer.summarizer", "extractive")
        return MemorySummarizer(model=self.llm) if use_llm else ExtractiveSummarizer()

    def _uses_llm(self, choice: str, key: str, offline: str) -> bool:
        """Whether a ``llm`` / ``auto`` / offline setting means the chat model (auto: when
        one is configured); ``llm`` without one is a ConfigError naming ``key``."""
        if choice == "llm" and self.llm is None:
            raise ConfigError(
                key,
                "is 'llm' but no chat model is configured",
                f"add llm.models: [{{chat: openai/gpt-4o-mini}}] or use '{offline}'",
            )
        return choice == "llm" or (choice == "auto" and self.llm is not None)

    def _new_buffer(self, user_id: str, session_id: str | None) -> BufferMemory:
        from tiermem.summarize_worker import SummaryPolicy

        settings = self.config.memory.buffer
        return BufferMemory(
            buffer_size=settings.size,
            max_tokens=settings.max_tokens,
            summarizer=self._new_summarizer(),
            multiplier=settings.multiplier,
            token_counter=self.token_counter,
            summary_policy=SummaryPolicy(batch_size=min(settings.summary_batch, settings.size)),
        )

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
        message = self._message(role, content, user_id, session_id, timestamp, metadata, fields)
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
        batch = self._batch(messages, user_id, session_id)
        self._record(user_id, session_id, batch, agent_id)
        return batch

    @property
    def commits_messages(self) -> bool:
        """Whether added messages are committed to the store before the call returns
        (persistent retention without ``memory`` durability): then
        :meth:`stage_messages` and :meth:`commit_staged` may be used."""
        return self._stored and self.durability != "memory"

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
        self._check_open()
        if not self.commits_messages:
            raise ConfigError(
                "memory.durability", "messages are not committed at once", "use add_messages"
            )
        batch = self._batch(messages, user_id, session_id)
        op = append_op(user_id, session_id, batch, agent_id, None, self._max_chars())
        return batch, op

    def commit_staged(self, ops: Iterable[AppendOp]) -> None:
        """Write staged messages (:meth:`stage_messages`) in one transaction, all or none,
        and wake the worker that embeds them."""
        self._check_open()
        _ = self.embedder  # a store of another dimension is refused before anything is added
        self.store.batch(list(ops))
        self.worker.wake()

    def _batch(
        self, messages: Iterable[Message | Mapping[str, Any]], user_id: str, session_id: str | None
    ) -> list[Message]:
        """``add_messages``' messages, validated (Message objects as they are)."""
        _user(user_id)
        if isinstance(messages, (str, bytes, Mapping, Message)) or not isinstance(
            messages, Iterable
        ):
            raise InvalidTypeError(
                "messages",
                f"expected a list of messages, got {type(messages).__name__}",
                "wrap a single message in a list",
            )
        batch: list[Message] = []
        for i, raw in enumerate(messages):
            if isinstance(raw, Message):
                message = raw
            elif isinstance(raw, Mapping):
                data = dict(raw)
                message = self._message(
                    data.pop("role", None),
                    data.pop("content", None),
                    user_id,
                    session_id,
                    data.pop("timestamp", None),
                    data.pop("metadata", None),
                    data,
                    f"messages[{i}]",
                )
            else:
                raise InvalidTypeError(f"messages[{i}]", "expected a Message or a message dict")
            batch.append(message)
        if not batch:
            raise InputError("messages", "is empty", "pass at least one message")
        return batch

    def _message(
        self,
        role: Any,
        content: Any,
        user_id: str,
        session_id: str | None,
        timestamp: Any,
        metadata: Any,
        fields: Mapping[str, Any],
        name: str = "message",
    ) -> Message:
        _user(user_id)
        check_text_id(session_id, "session_id")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidTypeError("metadata", f"expected a dict, got {type(metadata).__name__}")
        check_fields(fields, name)
        meta = {**(metadata or {}), "user_id": user_id}
        if session_id is not None:
            meta["session_id"] = session_id
        extra = dict(fields)
        if timestamp is not None:
            extra["timestamp"] = timestamp
        try:
            return Message(role, content, metadata=meta, **extra)
        except InputError as exc:
            if name == "message" or exc.field.startswith(name):
                raise
            raise exc.relabel(f"{name}.{exc.field}") from None

    def _record(
        self,
        user_id: str,
        session_id: str | None,
        messages: list[Message],
        agent_id: str | None,
    ) -> None:
        self._check_open()
        check_text_id(agent_id, "agent_id")
        limit = self._max_chars()
        if self.commits_messages:
            self.commit_staged([append_op(user_id, session_id, messages, agent_id, None, limit)])
            self.changes.changed(user_id, "messages")
            return
        entries = []
        previous: str | None = None
        if not self._stored:
            buffer = self.buffers.get(user_id, session_id)
            last = buffer.get_recent(1)
            previous = last[0].message_id if last else None
        for i, message in enumerate(messages):
            field = "message" if len(messages) == 1 else f"messages[{i}]"
            entries.append(message_entry(message, previous, agent_id, field, limit))
            previous = message.message_id
        if not self._stored:
            buffer.extend(messages)
        self.archiver.submit(
            ArchivedMessage(user_id, e.message, session_id, agent_id, e.previous_id)
            for e in entries
        )
        self.changes.changed(user_id, "messages")

    def _max_chars(self) -> int:
        """The longest line (speaker and text) a message may have: what the embedder takes."""
        embedder = self._embedder or self._embedder_spec
        return min(getattr(embedder, "max_chars", DEFAULT_MAX_CHARS), MAX_CONTENT_CHARS)

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
        self._check_open()
        _user(user_id)
        vector = self._embed(check_content(content))
        memory_id = self.store.add(
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
        self._check_open()
        _user(user_id)
        items = _new_memories(memories)
        vectors = self._embed_texts([m.content for m in items])
        ids = self.store.add_many(user_id, items, embeddings=vectors)
        if self.synopses is not None:
            for memory_type in {m.memory_type for m in items}:
                self.synopses.memory_added(user_id, memory_type)
        return [str(i) for i in ids]

    def synopsis(self, user_id: str) -> Synopsis:
        """The user's :class:`~tiermem.synopsis.Synopsis` (cached at the user's current
        change generation; generated on a miss)."""
        self._check_open()
        if self.synopses is None:
            raise ConfigError("memory.synopsis.enabled", "is false", "enable it to use synopses")
        user_id = _user(user_id)
        found: Synopsis = self.synopses.get(user_id, generation=self._generation(user_id))
        return found

    def generate_synopsis(self, user_id: str) -> Synopsis:
        """Regenerate and cache the user's synopsis now (seed 001's ``generate_synopsis``)."""
        self._check_open()
        if self.synopses is None:
            raise ConfigError("memory.synopsis.enabled", "is false", "enable it to use synopses")
        user_id = _user(user_id)
        made: Synopsis = self.synopses.generate_synopsis(
            user_id, generation=self._generation(user_id)
        )
        return made

    def _synopsis_text(self, user_id: str) -> str | None:
        """The synopsis for a context (None when synopses are disabled)."""
        if self.synopses is None:
            return None
        return str(self.synopses.get(user_id, generation=self._generation(user_id)).render())

    # -- export and import ---------------------------------------------------------------

    def export(self, user_id: str, *, include_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """The user's archive (docs/export.md), one dict per JSON line, read from the
        store page by page: transcript, summaries, fact marks, memories (facts with every
        version), with their vectors when ``include_vectors``."""
        from tiermem.export import archive_lines

        self._check_open()
        user_id = _user(user_id)
        if not isinstance(include_vectors, bool):
            raise InvalidTypeError("include_vectors", "must be a bool")
        if self._archiver is not None:
            self._archiver.flush(ERASE_TIMEOUT)
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
        from tiermem.export import read_archive
        from tiermem.stores.ops import ImportOp
        from tiermem.stores.transcript import RestoreOp

        self._check_open()
        if isinstance(archive, (str, bytes, Mapping)) or not isinstance(archive, Iterable):
            raise InvalidTypeError(
                "archive", "expected an iterable of lines", "pass open(path) or a list of lines"
            )
        restore = read_archive(archive, None if user_id is None else _user(user_id))
        owner = restore.user_id
        embedder = self.embedder
        same = (
            restore.header["embedding"]["model"] == embedder.model_id
            and restore.header["embedding"]["dimension"] == embedder.dimension
        )
        missing = [i for i, v in enumerate(restore.vectors) if v is None or not same]
        vectors = list(restore.vectors)
        for start in range(0, len(missing), 256):
            part = missing[start : start + 256]
            found = embedder.embed([restore.records[i].content for i in part])
            for i, vector in zip(part, found, strict=True):
                vectors[i] = vector
        records = tuple(
            replace(r, embedding=check_vector(v, self.store.dimension, f"memories[{i}]"))
            for i, (r, v) in enumerate(zip(restore.records, vectors, strict=True))
        )
        restore_op = RestoreOp(
            owner, tuple(restore.rows), tuple(restore.summaries), tuple(restore.marks)
        )
        added, rows = self.store.batch([ImportOp(records), restore_op])
        self.changes.changed(owner, "imported")
        if rows:
            self.worker.wake()
        return {"messages": int(rows), "memories": int(added)}

    # -- reading ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        user_id: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str = "hybrid",
    ) -> list[SearchResult]:
        """Search the user's long-term memories (hybrid by default), best first."""
        self._check_open()
        _user(user_id)
        if not isinstance(query, str):
            raise InvalidTypeError("query", f"expected str, got {type(query).__name__}")
        check_encodable(query, "query")
        if filters is not None and not isinstance(filters, Mapping):
            raise InvalidTypeError("filters", f"expected a dict, got {type(filters).__name__}")
        unknown = sorted(set(filters or {}) - SEARCH_FILTERS)
        if unknown:
            raise InvalidTypeError(
                f"filters.{unknown[0]}",
                "is not a search filter",
                f"use {', '.join(sorted(SEARCH_FILTERS))}",
            )
        vector = self._embed(query) if mode != "keyword" and query.strip() else None
        return list(
            self.store.search(user_id, query, vector=vector, mode=mode, limit=k, **(filters or {}))
        )

    def get_context(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        max_tokens: int | None = None,
    ) -> Context:
        """The context for ``query``: recent messages, relevant memories, summary and
        synopsis, ranked, deduplicated and fitted to ``max_tokens``."""
        self._check_open()
        _user(user_id)
        check_text_id(session_id, "session_id")
        if not isinstance(query, str):
            raise InvalidTypeError("query", f"expected str, got {type(query).__name__}")
        check_encodable(query, "query")
        window = self.planner.settings.recent_messages
        buffer = None
        if self._stored:
            recent, summary = self._session_state(user_id, session_id, window)
        else:
            buffer = self.buffers.peek(user_id, session_id)
            recent = buffer.get_recent(window) if buffer is not None and window else []
            summary = buffer.summary if buffer is not None else None
        candidates = self._candidates(query, user_id, session_id, buffer) if query.strip() else []
        context = self.planner.plan(
            query,
            max_tokens=max_tokens,
            recent=recent,
            candidates=candidates,
            summary=summary,
            synopsis=self._synopsis_text(user_id),
        )
        used = [i.memory_id for i in context.items if i.memory_id is not None]
        if used and not self._closed:
            self.accesses.record(user_id, used)
        return context

    def _session_state(
        self, user_id: str, session_id: str | None, window: int
    ) -> tuple[list[Message], str | None]:
        """The session's newest ``window`` messages and its running summary, from the store
        (one read: every process sharing the store sees the same)."""
        ops: list[Any] = [SummaryOp(user_id, session_id)]
        if window:
            ops.append(RecentOp(user_id, session_id, window))
        found = self.store.batch(ops)
        return (found[1] if window else []), found[0].text

    def _embed(self, text: str) -> Any:
        """One text's vector (see :meth:`_embed_texts`)."""
        return self._embed_texts([text])[0]

    def _embed_texts(self, texts: list[str]) -> Any:
        """The texts' vectors in one call; an embedder's own exception becomes a
        ProviderError."""
        from tiermem.errors import ProviderError, TiermemError

        try:
            return self.embedder.embed(texts)
        except TiermemError:
            raise
        except Exception as exc:
            raise ProviderError(f"the embedder failed: {type(exc).__name__}: {exc}") from exc

    def _embed_with_pending(self, query: str, rows: list[Any]) -> tuple[Any, dict[int, Any]]:
        """The query's vector and, from the same forward pass, those of the user's newest
        ``planner.pending_vectors`` messages not indexed yet (by ``seq``; failed rows,
        which the embedder refused, are left to keyword search, as all are when the
        embedder refuses one before the worker marked it failed). The embedder's cache
        (by content hash) keeps them, so a later call, or this process's worker, reuses
        them."""
        limit = self.planner.settings.pending_vectors
        fresh = [r for r in rows if r.state == "pending"][:limit]
        if not fresh:
            return self._embed(query), {}
        try:
            vectors = self._embed_texts([query, *(transcript_line(r.message) for r in fresh)])
        except TiermemError as exc:  # a row the worker will mark failed: keyword search
            log.debug("embedding the pending messages with the query failed: %s", exc)
            return self._embed(query), {}
        return vectors[0], {r.seq: v for r, v in zip(fresh, vectors[1:], strict=True)}

    def _candidates(
        self, query: str, user_id: str, session_id: str | None, buffer: BufferMemory | None
    ) -> list[Candidate]:
        from tiermem.stores.ops import SearchOp

        pool = self.planner.settings.k
        keyword = SearchOp(user_id, "keyword", None, query, pool, count_access=False)
        keyword_search = self._search_pool().submit(self.store.batch, [keyword])  # meanwhile:
        # read before the index is searched: a row the worker indexes in between is in
        # the index, or in both (the planner keeps one)
        unindexed: list[Any] = []
        if self._stored:
            unindexed = self.store.batch([UnindexedOp(user_id, UNINDEXED_LIMIT)])[0]
        vector, pending = self._embed_with_pending(query, unindexed)
        search = SearchOp(user_id, "vector", vector, None, pool, count_access=False)
        (vector_hits,) = self.store.batch([search])
        (keyword_hits,) = keyword_search.result()
        by_id: dict[Any, Candidate] = {}
        for hit in vector_hits:
            by_id[hit.record.id] = _from_record(hit.record, similarity=hit.score)
        for hit in keyword_hits:
            found = by_id.get(hit.record.id)
            if found is not None:
                found.keyword = hit.score
                continue
            embedding = hit.record.embedding
            similarity = float(embedding @ vector) if embedding is not None else None
            by_id[hit.record.id] = _from_record(hit.record, similarity, keyword=hit.score)
        candidates = list(by_id.values())
        if unindexed:
            # a pending row competes with the index's nearest: offered when as near as
            # the farthest vector hit of a full pool, or when it shares query words
            nearest = vector_hits[-1].score if len(vector_hits) >= pool else -math.inf
            candidates += _unindexed_candidates(query, unindexed, vector, pending, nearest)
        if self._working is not None:
            for item in self._working.search(vector, k=pool, user_id=user_id):
                candidates.append(
                    Candidate(
                        content=item.content,
                        source="working",
                        similarity=item.similarity,
                        key=candidate_key(item.content),
                    )
                )
        if buffer is not None and self.config.memory.buffer.vector_search:
            candidates += self._unarchived_candidates(vector, pool, buffer, user_id, session_id)
        return candidates

    def _unarchived_candidates(
        self,
        vector: Any,
        pool: int,
        buffer: BufferMemory,
        user_id: str,
        session_id: str | None,
    ) -> list[Candidate]:
        """The session's buffered messages, searched by vector (retention without the
        store: the working memory forgets under memory pressure, the buffer does not)."""
        found = []
        for message, similarity in buffer.vector_search(vector, self.embedder, pool, None):
            line = transcript_line(message)
            found.append(
                Candidate(
                    content=line,
                    source="buffer",
                    similarity=similarity,
                    timestamp=message.timestamp,
                    key=candidate_key(line),
                    session_id=session_id,
                    message_id=message.message_id,
                )
            )
        return found

    # -- records ---------------------------------------------------------------------------

    def list_memories(
        self,
        user_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        memory_type: str | Iterable[str] | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[MemoryRecord]:
        """A page of the user's long-term memories, newest first, filtered by type (one or
        several), session, agent, creation time or ``metadata`` (top-level keys equal to
        these str, int, float, bool or None values)."""
        self._check_open()
        filters: dict[str, Any] = {
            "session_id": session_id,
            "agent_id": agent_id,
            "created_after": created_after,
            "created_before": created_before,
            "metadata": metadata,
        }
        if memory_type is not None:
            filters["memory_type"] = memory_type
        return list(self.store.list(_user(user_id), limit=limit, offset=offset, **filters))

    def get_memory(self, memory_id: str, user_id: str) -> MemoryRecord | None:
        """One memory of the user; None if the user has none with this id."""
        self._check_open()
        return self.store.get(_user(user_id), memory_id)  # type: ignore[no-any-return]

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
        self._check_open()
        user_id = _user(user_id)
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
            changes["embedding"] = self._embed(check_content(content))
        record: MemoryRecord = self.store.update(user_id, memory_id, **changes)
        self.changes.changed(user_id, "memories")
        return record

    def stats(self, user_id: str) -> StoreStats:
        """Counts per type, time span, access and importance figures of the user."""
        self._check_open()
        return self.store.stats(_user(user_id))  # type: ignore[no-any-return]

    # -- forgetting and lifecycle ---------------------------------------------------------

    def forget(self, memory_id: str, user_id: str) -> bool:
        """Delete one memory of ``user_id``; False if it does not exist (or is another's)."""
        self._check_open()
        user_id = _user(user_id)
        deleted = bool(self.store.delete(user_id, memory_id))
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
        self._check_open()
        _user(user_id)
        if self._archiver is not None:  # a queue (memory durability): drop, and let a
            self._archiver.discard_user(user_id)  # batch of theirs in flight land first
            if not self._archiver.flush(ERASE_TIMEOUT):
                raise StoreUnavailableError(
                    f"cannot erase user {user_id!r}: the store has not accepted writes for "
                    f"{ERASE_TIMEOUT:.0f} s ({self._archiver.last_error}); nothing was erased, "
                    "retry when it is back"
                )
        try:
            deleted = int(self.store.delete_user(user_id))
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
        self._check_open()
        _user(user_id)
        check_text_id(session_id, "session_id")
        if self._stored:
            if self._archiver is not None:
                self._archiver.flush(ERASE_TIMEOUT)
            summary = self.worker.summarize_session(
                user_id, session_id, window=0, batch=1, wait=ERASE_TIMEOUT
            )
        else:
            buffer = self.buffers.peek(user_id, session_id)
            if buffer is None:
                return None
            self.buffers.drop(user_id, session_id)
            buffer.flush()
            summary = buffer.summary
        if summary and self._stored:
            self.remember(summary, user_id, "summary", 0.4, session_id=session_id)
        if self._stored and self.config.memory.facts.enabled:
            self._extract_at_end(user_id, session_id)
        return str(summary) if summary is not None else None

    def _extract_at_end(self, user_id: str, session_id: str | None) -> None:
        """Read the session's last messages for facts; a failure is recorded (the
        messages stay unread) and does not fail the end of the session."""
        try:
            self.extract_facts(user_id, session_id)
        except Exception as exc:
            log.warning("facts at the end of a session: %s", exc)

    # -- facts from conversations ----------------------------------------------------------

    def _fact_worker(self) -> Any:
        self._check_open()
        if not self._stored:
            raise ConfigError(
                "memory.retention", f"is {self.retention!r}", "facts need persistent retention"
            )
        facts = self.worker.facts
        if facts is None:
            raise ConfigError("memory.facts.enabled", "is false", "set it to true to use facts")
        return facts

    def extract_facts(self, user_id: str, session_id: str | None = None) -> list[str]:
        """Extract facts from the session's messages not read yet, now (in batches of
        ``memory.facts.max_batch``); the ids of the facts written or merged.

        Raises the extractor's error (the LLM is down...) after recording it; the
        messages stay due and are read again later.
        """
        user_id = _user(user_id)
        check_text_id(session_id, "session_id")
        facts = self._fact_worker()
        if self._archiver is not None:
            self._archiver.flush(ERASE_TIMEOUT)
        written: list[str] = []
        while True:
            ids = facts.extract_session(user_id, session_id, force=True)
            if ids is None:
                return written
            written += ids

    def facts(self, user_id: str, *, current: bool = True, limit: int = 1000) -> list[MemoryRecord]:
        """The user's facts extracted from conversations (the current versions, or every
        version with ``current=False``), newest first."""
        from tiermem.facts import CURRENT

        self._check_open()
        flt = CURRENT if current else CURRENT._replace(metadata=None)
        records = self.store.batch([ListOp(_user(user_id), flt, check_limit(limit))])[0]
        return [r for r in records if current or "claim" in (r.metadata or {})]

    def fact_history(self, memory_id: str, user_id: str) -> list[MemoryRecord]:
        """Every version of a fact, oldest first: superseded versions keep their text and
        say until when they held (``metadata["valid_until"]``)."""
        from tiermem.stores.facts import FactVersionsOp

        self._check_open()
        user_id = _user(user_id)
        fact_id = str(check_uuid(memory_id))
        versions = list(self.store.batch([FactVersionsOp(user_id, fact_id)])[0])
        if not versions:
            raise NotFoundError(f"fact {memory_id} not found for this user_id")
        return versions

    # -- the write path's state ---------------------------------------------------------

    def recent(self, user_id: str, session_id: str | None = None, limit: int = 20) -> list[Message]:
        """The newest ``limit`` messages of a session, oldest first (from the store with
        persistent retention, so every process sharing it sees the same)."""
        self._check_open()
        _user(user_id)
        if self._stored:
            return list(self.store.recent(user_id, session_id, limit))
        buffer = self.buffers.peek(user_id, session_id)
        return buffer.get_recent(limit) if buffer is not None else []

    def session_summary(self, user_id: str, session_id: str | None = None) -> str | None:
        """The running summary of the session's messages older than the recent window
        (what :meth:`get_context` offers as the summary), or None while there is none."""
        self._check_open()
        _user(user_id)
        check_text_id(session_id, "session_id")
        if not self._stored:
            buffer = self.buffers.peek(user_id, session_id)
            return buffer.summary if buffer is not None else None
        return self._session_state(user_id, session_id, 0)[1]

    def history(self, user_id: str, session_id: str | None = None) -> list[Message]:
        """Every message of a session in the order added, whole (tool calls, ids, metadata),
        repeated lines included."""
        self._check_open()
        _user(user_id)
        check_text_id(session_id, "session_id")
        if not self._stored:
            buffer = self.buffers.peek(user_id, session_id)
            return list(buffer.messages) if buffer is not None else []
        if self._archiver is not None:
            self._archiver.flush(ERASE_TIMEOUT)
        out: list[Message] = []
        after = 0
        while True:
            rows = self.store.transcript(
                user_id, session_id=session_id, any_session=False, after=after, limit=1000
            )
            out += [r.message for r in rows]
            if len(rows) < 1000:
                return out
            after = rows[-1].seq

    def forget_messages(self, user_id: str, message_ids: Iterable[str]) -> int:
        """Delete these messages of the user (by message id) from the transcript and the
        index (an index line another message still says stays); how many went."""
        self._check_open()
        _user(user_id)
        ids = _message_ids(message_ids)
        if not self._stored:
            gone = set(ids)
            deleted = 0
            for key in [k for k in self.buffers if k[0] == user_id]:
                buffer = self.buffers.peek(*key)
                if buffer is None:
                    continue
                kept = [m for m in buffer.messages if m.message_id not in gone]
                deleted += len(buffer) - len(kept)
                if len(kept) < len(buffer):
                    summary = buffer.summary
                    buffer.clear()
                    buffer.extend(kept)
                    buffer.summary = summary
            self.changes.changed(user_id, "forgotten")
            return deleted
        if self._archiver is not None:
            self._archiver.flush(ERASE_TIMEOUT)
        deleted = int(self.store.forget_messages(user_id, ids))
        self.changes.changed(user_id, "forgotten")
        return deleted

    def forget_session(self, user_id: str, session_id: str | None = None) -> int:
        """Delete a session: its messages, its summary and the index lines only it said."""
        self._check_open()
        _user(user_id)
        check_text_id(session_id, "session_id")
        buffer = self.buffers.peek(user_id, session_id)
        self.buffers.drop(user_id, session_id, drain=False)
        if not self._stored:
            self.changes.changed(user_id, "forgotten")
            return len(buffer) if buffer is not None else 0
        if self._archiver is not None:
            self._archiver.flush(ERASE_TIMEOUT)
        deleted = int(self.store.forget_session(user_id, session_id))
        self.changes.changed(user_id, "forgotten")
        return deleted

    def sessions(self, user_id: str) -> list[SessionInfo]:
        """The user's sessions in the store, most recently active first."""
        self._check_open()
        return list(self.store.sessions(_user(user_id)))

    def failed(self, user_id: str, limit: int = 100) -> list[TranscriptRow]:
        """The user's messages that could not be indexed, each with its ``error``: they
        stay in the transcript (and the recent window) and are found by keyword."""
        self._check_open()
        return list(self.store.failed(_user(user_id), limit))

    def retry_failed(self, user_id: str) -> int:
        """Queue the user's failed messages again (after fixing the cause); how many."""
        self._check_open()
        count = int(self.store.retry_failed(_user(user_id)))
        if count:
            self.worker.wake()
        return count

    def work_stats(self, user_id: str | None = None) -> WorkStats:
        """Messages pending, done and failed in the store (one user's, or everyone's)."""
        self._check_open()
        stats: WorkStats = self.store.work_stats(None if user_id is None else _user(user_id))
        return stats

    @property
    def pending(self) -> int:
        """Messages queued in this process and not yet in the store (``memory`` durability,
        or the working memory's queue): what a crash now would lose."""
        return self._archiver.pending if self._archiver is not None else 0

    # -- the operator's view (every user: for servers and dashboards) ------------------

    def users(self, limit: int = 100, after: str = "") -> list[str]:
        """Every user with messages or memories in the store, by id; pass the last id as
        ``after`` for the next page (an admin view: it reads across users)."""
        self._check_open()
        return list(self.store.users(limit, after))

    def size(self) -> int:
        """How many long-term memories the store holds, every user's."""
        from tiermem.stores.ops import TableSizeOp

        self._check_open()
        return int(self.store.batch([TableSizeOp()])[0])

    def queue_status(self) -> dict[str, Any]:
        """This process's queue of messages not yet in the store (``memory`` durability):
        ``pending``, ``failures`` (batches retried) and ``last_error``."""
        archiver = self._archiver
        error = archiver.last_error if archiver is not None else None
        return {
            "pending": archiver.pending if archiver is not None else 0,
            "failures": archiver.failures if archiver is not None else 0,
            "last_error": f"{type(error).__name__}: {error}" if error else None,
        }

    @property
    def location(self) -> str | None:
        """The SQLite file of the store, or None (PostgreSQL, or not opened from a path)."""
        return getattr(self._store or self.store, "path", None)

    def health(self) -> dict[str, str]:
        """Whether the store, the embedding model and the cache answer: ``"ok"`` or what
        failed, by part. Never raises (a readiness probe's view)."""
        return {
            "store": _probe(self.size),
            "model": _probe(lambda: self._embed("ready")),
            "cache": _probe(self._ping_cache),
        }

    def _ping_cache(self) -> None:
        ping = getattr(getattr(self.synopses, "cache", None), "ping", None)
        if ping is not None:
            ping()

    def end_run(self) -> None:
        """End a run. With ``single_run`` retention, every buffer and the working memory
        are cleared (seed 004's policy); otherwise nothing happens."""
        if self.retention != "single_run":
            return
        self.flush()
        for user_id, session_id in self.buffers:
            self.buffers.drop(user_id, session_id, drain=False)
        if self._working is not None:
            self._working.clear(all_users=True)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued messages are written, the store's pending work (embedding,
        summaries) is done and access counts are written; False on timeout (or when the
        store refused the counts)."""
        if not isinstance(timeout, (int, float, type(None))) or isinstance(timeout, bool):
            raise InvalidTypeError("timeout", f"must be seconds or None, got {timeout!r}")
        done = self._archiver.flush(timeout) if self._archiver is not None else True
        if self._stored and not self._closed:
            done = self.worker.flush(timeout) and done
        if self._accesses is not None:
            done = self._accesses.flush() and done
        for key in self.buffers:
            buffer = self.buffers.peek(*key)
            if buffer is not None:
                done = buffer.flush(timeout) and done
        return done

    def close(self, timeout: float | None = 30.0) -> None:
        """Write what is queued, index the store's pending messages (each up to
        ``timeout`` s: what is left stays pending in the store for the next worker) and
        release the store, cache connections and threads.

        Raises:
            StoreUnavailableError: the store never accepted some messages; they are in
                :attr:`unarchived`, to add again later. Everything else is released.
        """
        if not isinstance(timeout, (int, float, type(None))) or isinstance(timeout, bool):
            raise InvalidTypeError("timeout", f"must be seconds or None, got {timeout!r}")
        with self._lock:  # tiers built lazily check it under the same lock
            if self._closed:
                return
            self._closed = True
        archiver = self._archiver
        unwritten = archiver.close(timeout) if archiver is not None else []
        if self._worker is not None:
            self._worker.close(timeout)
            try:  # what can be indexed now is, before the process goes, if it can in time
                self._worker.drain(timeout)
            except TiermemError as exc:  # the store is down: the rows wait in the store
                log.warning("close: the store's pending work stays pending: %s", exc)
        if self._searches is not None:
            self._searches.shutdown()
        if self._accesses is not None:
            self._accesses.close()
        if self._working is not None:
            self._working.close()
        if self._synopsis is not None and self._owns_synopsis:
            self._synopsis.cache.close()
        if self._store is not None and self._owns_store:
            self._store.close()
        if unwritten and archiver is not None:
            self.unarchived = [item.message for item in unwritten]
            raise StoreUnavailableError(
                f"{len(unwritten)} messages could not be archived ({archiver.last_error}); "
                "they are in Memory.unarchived: add them again when the store is back"
            )

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this Memory is closed: make a new Memory (or use `with Memory()`)")

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
    asearch = twin(search)
    aget_context = twin(get_context)
    alist_memories = twin(list_memories)
    aget_memory = twin(get_memory)
    ahistory = twin(history)
    arecent = twin(recent)
    asessions = twin(sessions)
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
    awork_stats = twin(work_stats)
    afailed = twin(failed)
    aretry_failed = twin(retry_failed)
    aimport_archive = twin(import_archive)
    aflush = twin(flush)
    aclose = twin(close)

    async def aexport(
        self, user_id: str, *, include_vectors: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        """Async twin of :meth:`export`: the archive's lines read in threads, a page at a time."""
        lines = await asyncio.to_thread(self.export, user_id, include_vectors=include_vectors)
        while page := await asyncio.to_thread(list, itertools.islice(lines, 256)):
            for line in page:
                yield line


def _probe(check: Any) -> str:
    """``"ok"``, or what ``check`` raised (a probe reports failures, never raises them)."""
    try:
        check()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300]
    return "ok"


def _message_ids(message_ids: Any) -> list[str]:
    """Message ids given as one id or an iterable of ids, each a valid text id."""
    if isinstance(message_ids, str):
        message_ids = [message_ids]
    if isinstance(message_ids, (bytes, Mapping)) or not isinstance(message_ids, Iterable):
        raise InvalidTypeError(
            "message_ids", f"expected a list of ids, got {type(message_ids).__name__}"
        )
    ids = list(message_ids)
    for i, message_id in enumerate(ids):
        check_text_id(message_id, f"message_ids[{i}]")
    return ids


def _check_dimension(store: Any, embedder: Any) -> None:
    """A given store must hold vectors of the embedder's width (else every write fails)."""
    if store.dimension != embedder.dimension:
        raise DimensionMismatchError(
            "embedder",
            f"{embedder.model_id} makes {embedder.dimension}-dimensional vectors, "
            f"the store holds {store.dimension}",
            "use an embedder and a store of the same dimension",
        )


MEMORY_FIELDS = frozenset(
    {"content", "memory_type", "importance", "session_id", "agent_id", "metadata", "created_at"}
)
"""The fields of an item of :meth:`Memory.remember_many`."""


def _new_memories(memories: Iterable[Mapping[str, Any]]) -> list[NewMemory]:
    """``remember_many``'s items as memories to add (the store checks their values)."""
    if isinstance(memories, (str, bytes, Mapping)) or not isinstance(memories, Iterable):
        raise InvalidTypeError(
            "memories",
            f"expected a list of memory dicts, got {type(memories).__name__}",
            "wrap a single memory in a list",
        )
    items: list[NewMemory] = []
    for i, raw in enumerate(memories):
        name = f"memories[{i}]"
        if len(items) == MAX_LIMIT:
            raise InvalidSizeError("memories", f"has more than {MAX_LIMIT} items", "split it")
        if not isinstance(raw, Mapping):
            raise InvalidTypeError(name, f"expected a dict, got {type(raw).__name__}")
        unknown = sorted(str(k) for k in set(raw) - MEMORY_FIELDS)
        if unknown:
            raise InvalidTypeError(
                f"{name}.{unknown[0]}",
                "is not a field of a memory",
                f"use {', '.join(sorted(MEMORY_FIELDS))}",
            )
        items.append(
            NewMemory(
                content=check_content(raw.get("content"), f"{name}.content"),
                memory_type=raw.get("memory_type", "fact"),
                agent_id=raw.get("agent_id"),
                session_id=raw.get("session_id"),
                importance=raw.get("importance", 0.5),
                metadata=raw.get("metadata"),
                created_at=raw.get("created_at"),
            )
        )
    if not items:
        raise InputError("memories", "is empty", "pass at least one memory")
    return items


def _discard(batch: list[ArchivedMessage], vectors: Any) -> None:
    """The sink when nothing outside the buffers keeps messages."""


def _unindexed_candidates(
    query: str, rows: list[Any], vector: Any, vectors: dict[int, Any], nearest: float
) -> list[Candidate]:
    """The user's messages not indexed yet, scored as indexed ones are: by cosine to the
    query ``vector`` for those embedded with it (``vectors``, by seq), offered when at
    least ``nearest``; and by how many query words a line holds (keyword search of the
    rest)."""
    import re

    from tiermem.stores.keywords import keyword_terms

    terms = set(keyword_terms(query))
    found = []
    for row in rows:
        message = row.message
        line = transcript_line(message)
        score = len(terms.intersection(re.findall(r"\w+", line.lower())))
        own = vectors.get(row.seq)
        similarity = None if own is None else float(own @ vector)
        if score or (similarity is not None and similarity >= nearest):
            found.append(
                Candidate(
                    content=line,
                    source="store",
                    similarity=similarity,
                    keyword=float(score) if score else None,
                    timestamp=message.timestamp,
                    key=candidate_key(line),
                    session_id=row.session_id,
                    message_id=message.message_id,
                    previous_id=row.previous_id,
                    vector=own,
                )
            )
    return found


def _from_record(record: Any, similarity: float | None, keyword: float | None = None) -> Candidate:
    from tiermem.facts import fact_line

    metadata = record.metadata or {}
    content, current, sources, source_ids = fact_line(record)
    return Candidate(
        content=content,
        source="store",
        similarity=similarity,
        keyword=keyword,
        timestamp=record.created_at,
        importance=record.importance,
        key=candidate_key(record.content),
        session_id=record.session_id,
        message_id=metadata.get("message_id"),
        previous_id=metadata.get("previous_id"),
        memory_id=record.id,
        vector=record.embedding,
        current=current,
        sources=sources,
        source_ids=source_ids,
    )


if TYPE_CHECKING:  # mypy checks that Memory implements the whole contract, both halves

    def _implements(memory: Memory) -> tuple[MemoryAPI, AsyncMemoryAPI]:
        return memory, memory


__all__ = ["RETENTIONS", "Memory"]
