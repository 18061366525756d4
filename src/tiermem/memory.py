"""Memory: the facade that wires the tiers together for every user and agent.

``Memory()`` is the embedded default: a SQLite file, local MiniLM embeddings, extractive
summaries and an in-process synopsis cache; no server, no key. Each (user_id, session_id)
has its own buffer; every message is also archived to the long-term store in batches off
the hot path, and what leaves a buffer is summarized, so nothing said is unreachable.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tiermem.access import AccessLog
from tiermem.archive import (
    ArchivedMessage,
    Archiver,
    store_sink,
    transcript_line,
    working_sink,
)
from tiermem.buffer import BufferMemory, BufferRegistry
from tiermem.config import Retention
from tiermem.embeddings.base import DEFAULT_MAX_CHARS
from tiermem.errors import (
    ConfigError,
    ContentTooLargeError,
    DimensionMismatchError,
    InvalidTypeError,
    MissingUserError,
    StoreUnavailableError,
)
from tiermem.messages import Content, Message
from tiermem.planner import Candidate, Context, QueryPlanner, candidate_key
from tiermem.stores.base import MAX_CONTENT_CHARS, check_content
from tiermem.tokens import TokenCounter, get_token_counter

RETENTIONS: tuple[str, ...] = ("single_run", "session", "persistent")
PROFILE_TYPES = ("fact", "preference", "context", "summary")
ERASE_TIMEOUT = 30.0
"""Seconds forget_user waits for a batch of the user's messages already being written."""


def _user(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise MissingUserError(
            "user_id", "a non-empty string is required", "every memory belongs to one user"
        )
    return user_id


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

    Retention (``memory.retention``): ``persistent`` archives every message to the store;
    ``session`` keeps messages only in this process's buffers (facts from ``remember`` are
    still stored); ``single_run`` also clears the buffers at :meth:`end_run`.
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

        self.config = config if isinstance(config, TiermemConfig) else TiermemConfig.load(config)
        settings = self.config.memory
        self.retention: Retention = settings.retention
        self._path = path
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
        self._accesses: AccessLog | None = None
        self._searches: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()
        self._closed = False
        self.buffers = BufferRegistry(self._new_buffer)
        self.unarchived: list[Message] = []
        """Messages a failing store never accepted before :meth:`close` (normally empty)."""

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
            )
        from tiermem.stores import SQLiteStore

        path = self._path or (str(persistent.path) if persistent.enabled else ":memory:")
        return SQLiteStore(path, dimension=self.embedder.dimension, embedder=self.embedder)

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

    def _profile_memories(self, user_id: str) -> list[Any]:
        """What a synopsis is written from: the user's facts, preferences and context."""
        return list(self.store.list(user_id, limit=200, memory_type=list(PROFILE_TYPES)))

    @property
    def archiver(self) -> Archiver:
        """The background writer of messages to the store."""
        if self._archiver is None:
            with self._lock:
                if self._archiver is None:
                    if self.retention == "persistent":
                        sink = store_sink(self.store)
                    elif self.working is not None:
                        sink = working_sink(self.working)
                    else:
                        sink = _discard
                    self._archiver = Archiver(sink, self.embedder)
        return self._archiver

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

    def _new_buffer(self, user_id: str, session_id: str | None) -> BufferMemory:
        from tiermem.summarize import ExtractiveSummarizer, MemorySummarizer
        from tiermem.summarize_worker import SummaryPolicy

        settings = self.config.memory.buffer
        summarizer = self._summarizer
        if summarizer is None:
            use_llm = settings.summarizer == "llm" or (
                settings.summarizer == "auto" and self.llm is not None
            )
            if use_llm and self.llm is None:
                raise ConfigError(
                    "memory.buffer.summarizer",
                    "is 'llm' but no chat model is configured",
                    "add llm.models: [{chat: openai/gpt-4o-mini}] or use 'extractive'",
                )
            summarizer = MemorySummarizer(model=self.llm) if use_llm else ExtractiveSummarizer()
        return BufferMemory(
            buffer_size=settings.size,
            max_tokens=settings.max_tokens,
            summarizer=summarizer,
            multiplier=settings.multiplier,
            token_counter=self.token_counter,
            summary_policy=SummaryPolicy(batch_size=min(settings.summary_batch, settings.size)),
        )

    # -- writing ---------------------------------------------------------------------------

    def add(
        self,
        role: str,
        content: Content,
        user_id: str,
        session_id: str | None = None,
        timestamp: Any = None,
        metadata: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Message:
        """Add one message of a conversation; O(1), never waits on a model.

        Other :class:`Message` fields (``name``, ``tool_calls``...) go in ``fields``.
        """
        message = self._message(role, content, user_id, session_id, timestamp, metadata, fields)
        self._record(user_id, session_id, [message])
        return message

    def add_messages(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        user_id: str,
        session_id: str | None = None,
    ) -> list[Message]:
        """Import a history (Message objects or dicts with their own ``timestamp``).

        All messages are validated before any is added.
        """
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
                )
            else:
                raise InvalidTypeError(f"messages[{i}]", "expected a Message or a message dict")
            batch.append(message)
        self._record(user_id, session_id, batch)
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
    ) -> Message:
        _user(user_id)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidTypeError("metadata", f"expected a dict, got {type(metadata).__name__}")
        meta = {**(metadata or {}), "user_id": user_id}
        if session_id is not None:
            meta["session_id"] = session_id
        extra = dict(fields)
        if timestamp is not None:
            extra["timestamp"] = timestamp
        return Message(role, content, metadata=meta, **extra)

    def _record(self, user_id: str, session_id: str | None, messages: list[Message]) -> None:
        self._check_open()
        for i, message in enumerate(messages):
            self._check_archivable(message, "content" if len(messages) == 1 else f"messages[{i}]")
        archiver = self.archiver
        buffer = self.buffers.get(user_id, session_id)
        last = buffer.get_recent(1)
        previous = last[0].message_id if last else None
        buffer.extend(messages)
        items = []
        for message in messages:
            items.append(ArchivedMessage(user_id, message, session_id, None, previous))
            previous = message.message_id
        archiver.submit(items)

    def _check_archivable(self, message: Message, field: str) -> None:
        """Refuse a message the archive could never write: it would be retried forever
        and hold up every message queued behind it."""
        line = transcript_line(message)
        embedder = self._embedder or self._embedder_spec
        limit = min(getattr(embedder, "max_chars", DEFAULT_MAX_CHARS), MAX_CONTENT_CHARS)
        if len(line) > limit:
            raise ContentTooLargeError(
                field,
                f"has {len(line)} characters with its speaker; the most a message can have is "
                f"{limit}",
                "split it into several messages",
            )
        check_content(line, field)

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
        vector = self.embedder.embed([check_content(content)])[0]
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
        if self.synopses is not None:
            self.synopses.memory_added(user_id, memory_type)
        return str(memory_id)

    def synopsis(self, user_id: str) -> Any:
        """The user's :class:`~tiermem.synopsis.Synopsis` (cached; generated on a miss)."""
        self._check_open()
        if self.synopses is None:
            raise ConfigError("memory.synopsis.enabled", "is false", "enable it to use synopses")
        return self.synopses.get(_user(user_id))

    def generate_synopsis(self, user_id: str) -> Any:
        """Regenerate and cache the user's synopsis now (seed 001's ``generate_synopsis``)."""
        self._check_open()
        if self.synopses is None:
            raise ConfigError("memory.synopsis.enabled", "is false", "enable it to use synopses")
        return self.synopses.generate_synopsis(_user(user_id))

    # -- reading ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        user_id: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str = "hybrid",
    ) -> list[Any]:
        """Search the user's long-term memories (hybrid by default), best first."""
        self._check_open()
        _user(user_id)
        if not isinstance(query, str):
            raise InvalidTypeError("query", f"expected str, got {type(query).__name__}")
        vector = self.embedder.embed([query])[0] if mode != "keyword" and query.strip() else None
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
        if not isinstance(query, str):
            raise InvalidTypeError("query", f"expected str, got {type(query).__name__}")
        buffer = self.buffers.peek(user_id, session_id)
        window = self.planner.settings.recent_messages
        recent = buffer.get_recent(window) if buffer is not None else []
        candidates = self._candidates(query, user_id, session_id, buffer) if query.strip() else []
        context = self.planner.plan(
            query,
            max_tokens=max_tokens,
            recent=recent,
            candidates=candidates,
            summary=buffer.summary if buffer is not None else None,
            synopsis=self.synopses.get(user_id).render() if self.synopses is not None else None,
        )
        used = [i.memory_id for i in context.items if i.memory_id is not None]
        if used and not self._closed:
            self.accesses.record(user_id, used)
        return context

    def _candidates(
        self, query: str, user_id: str, session_id: str | None, buffer: BufferMemory | None
    ) -> list[Candidate]:
        from tiermem.stores.base import SearchOp

        pool = self.planner.settings.k
        keyword = SearchOp(user_id, "keyword", None, query, pool, count_access=False)
        keyword_search = self._search_pool().submit(self.store.batch, [keyword])  # meanwhile:
        vector = self.embedder.embed([query])[0]
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
        """The session's buffered messages that the long-term store cannot find yet.

        Messages archived to the store are found by its searches, with their keyword
        scores and context-aware vectors; offering their buffer copies as well would count
        them twice. Without the store (``session`` and ``single_run`` retention) every
        buffered message is offered: the working memory forgets under memory pressure.
        """
        archiver = self._archiver
        only = None
        if archiver is not None and self.retention == "persistent":
            only = archiver.unwritten(user_id, session_id)
            if not only:
                return []
        found = []
        for message, similarity in buffer.vector_search(vector, self.embedder, pool, only):
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

    # -- forgetting and lifecycle ---------------------------------------------------------

    def forget(self, memory_id: str, user_id: str) -> bool:
        """Delete one memory of ``user_id``; False if it does not exist (or is another's)."""
        self._check_open()
        return bool(self.store.delete(_user(user_id), memory_id))

    def forget_user(self, user_id: str) -> int:
        """Erase everything of ``user_id``: buffers, queued messages, working and long-term
        memories. Returns the number of long-term memories deleted."""
        self._check_open()
        _user(user_id)
        if self._accesses is not None:
            self._accesses.discard_user(user_id)
        if self._archiver is not None:
            self._archiver.discard_user(user_id)
            if not self._archiver.flush(ERASE_TIMEOUT):  # a batch of theirs may be in flight
                raise StoreUnavailableError(
                    f"cannot erase user {user_id!r}: the store has not accepted writes for "
                    f"{ERASE_TIMEOUT:.0f} s ({self._archiver.last_error}); nothing was erased, "
                    "retry when it is back"
                )
        self.buffers.drop_user(user_id, drain=False)
        if self._working is not None:
            self._working.clear(user_id)
        if self.synopses is not None:
            self.synopses.invalidate(user_id)
        return int(self.store.delete_user(user_id))

    def end_session(self, user_id: str, session_id: str | None = None) -> str | None:
        """Close a session: its buffer is drained into its running summary and dropped.

        The final summary is returned and, with ``persistent`` retention, kept in the
        long-term store as a ``summary`` memory of the session (the synopsis reads those).
        """
        buffer = self.buffers.peek(_user(user_id), session_id)
        if buffer is None:
            return None
        self.buffers.drop(user_id, session_id)
        buffer.flush()
        summary = buffer.summary
        if summary and self.retention == "persistent":
            self.remember(summary, user_id, "summary", 0.4, session_id=session_id)
        return summary

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
        """Wait until queued messages are archived and summarized and access counts are
        written; False on timeout (or when the store refused the counts)."""
        done = self._archiver.flush(timeout) if self._archiver is not None else True
        if self._accesses is not None:
            done = self._accesses.flush() and done
        for key in self.buffers:
            buffer = self.buffers.peek(*key)
            if buffer is not None:
                done = buffer.flush(timeout) and done
        return done

    def close(self, timeout: float | None = 30.0) -> None:
        """Archive what is queued (waiting up to ``timeout`` s) and release the store, cache
        connections and threads.

        Raises:
            StoreUnavailableError: the store never accepted some messages; they are in
                :attr:`unarchived`, to add again later. Everything else is released.
        """
        with self._lock:  # tiers built lazily check it under the same lock
            if self._closed:
                return
            self._closed = True
        archiver = self._archiver
        unwritten = archiver.close(timeout) if archiver is not None else []
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
            raise RuntimeError("this Memory is closed")

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async twins -----------------------------------------------------------------------

    async def aadd(self, *args: Any, **kwargs: Any) -> Message:
        """Async twin of :meth:`add` (in-memory and O(1): it runs inline)."""
        return self.add(*args, **kwargs)

    async def aadd_messages(self, *args: Any, **kwargs: Any) -> list[Message]:
        """Async twin of :meth:`add_messages`."""
        return self.add_messages(*args, **kwargs)

    async def aremember(self, *args: Any, **kwargs: Any) -> str:
        """Async twin of :meth:`remember` (embeds and writes in a thread)."""
        return await asyncio.to_thread(self.remember, *args, **kwargs)

    async def asearch(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Async twin of :meth:`search`."""
        return await asyncio.to_thread(self.search, *args, **kwargs)

    async def aget_context(self, *args: Any, **kwargs: Any) -> Context:
        """Async twin of :meth:`get_context`."""
        return await asyncio.to_thread(self.get_context, *args, **kwargs)

    async def aforget(self, *args: Any, **kwargs: Any) -> bool:
        """Async twin of :meth:`forget`."""
        return await asyncio.to_thread(self.forget, *args, **kwargs)

    async def aforget_user(self, *args: Any, **kwargs: Any) -> int:
        """Async twin of :meth:`forget_user`."""
        return await asyncio.to_thread(self.forget_user, *args, **kwargs)

    async def aflush(self, timeout: float | None = None) -> bool:
        """Async twin of :meth:`flush`."""
        return await asyncio.to_thread(self.flush, timeout)

    async def aclose(self, timeout: float | None = 30.0) -> None:
        """Async twin of :meth:`close`."""
        await asyncio.to_thread(self.close, timeout)


def _check_dimension(store: Any, embedder: Any) -> None:
    """A given store must hold vectors of the embedder's width (else every write fails)."""
    if store.dimension != embedder.dimension:
        raise DimensionMismatchError(
            "embedder",
            f"{embedder.model_id} makes {embedder.dimension}-dimensional vectors, "
            f"the store holds {store.dimension}",
            "use an embedder and a store of the same dimension",
        )


def _discard(batch: list[ArchivedMessage], vectors: Any) -> None:
    """The sink when nothing outside the buffers keeps messages."""


def _from_record(record: Any, similarity: float | None, keyword: float | None = None) -> Candidate:
    metadata = record.metadata or {}
    return Candidate(
        content=record.content,
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
    )


__all__ = ["RETENTIONS", "Memory"]
