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
from typing import Any, Literal

from tiermem.archive import ArchivedMessage, Archiver, transcript_line
from tiermem.buffer import BufferMemory, BufferRegistry
from tiermem.errors import ConfigError, InvalidTypeError, MissingUserError
from tiermem.messages import Content, Message
from tiermem.planner import Candidate, Context, PlannerSettings, QueryPlanner, candidate_key
from tiermem.tokens import TokenCounter, get_token_counter

Retention = Literal["single_run", "session", "persistent"]
RETENTIONS: tuple[str, ...] = ("single_run", "session", "persistent")


def _user(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise MissingUserError(
            "user_id", "a non-empty string is required", "every memory belongs to one user"
        )
    return user_id


class Memory:
    """Tiered memory for many users and agents.

    Args:
        path: SQLite file of the embedded store (default: the user data dir).
        store: a :class:`~tiermem.stores.MemoryStore` to use instead (PostgresStore...).
        embedder: an Embedder or a model string (default ``local/all-MiniLM-L6-v2``).
        summarizer: summarizes what leaves a buffer (default: the offline extractive one).
        token_counter: counts context tokens (default: exact o200k_base).
        buffer_size: messages each (user, session) buffer keeps.
        buffer_tokens: optional token window of each buffer.
        planner: ranking and budget settings of :meth:`get_context`.
        retention: ``persistent`` archives messages to the store; ``session`` keeps them in
            the buffers and working memory of this process; ``single_run`` also clears them
            at :meth:`end_run`.
        working: keep session-scoped vectors (tool results, non-persistent messages) in an
            in-process FAISS index.
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        store: Any = None,
        embedder: Any = None,
        summarizer: Any = None,
        token_counter: TokenCounter | None = None,
        buffer_size: int = 50,
        buffer_tokens: int | None = None,
        planner: PlannerSettings | None = None,
        retention: Retention = "persistent",
        working: bool = True,
        synopsis: Any = None,
    ) -> None:
        if retention not in RETENTIONS:
            raise ConfigError(
                "retention", f"unknown policy {retention!r}", f"use one of {RETENTIONS}"
            )
        self.retention = retention
        self._path = path
        self._store = store
        self._embedder_spec = embedder
        self._embedder: Any = None
        self.token_counter = token_counter or get_token_counter()
        self._summarizer = summarizer
        self.planner = QueryPlanner(planner, counter=self.token_counter)
        self._use_working = working
        self._working: Any = None
        self._synopsis = synopsis
        self._archiver: Archiver | None = None
        self._lock = threading.RLock()
        self._closed = False
        self.buffers = BufferRegistry(self._new_buffer)
        self._buffer_size = buffer_size
        self._buffer_tokens = buffer_tokens
        BufferMemory(buffer_size=buffer_size, max_tokens=buffer_tokens)  # validate early

    # -- lazily built tiers --------------------------------------------------------------

    @property
    def embedder(self) -> Any:
        """The embedder (built on first use: loading a local model takes seconds)."""
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    from tiermem.embeddings import get_embedder

                    self._embedder = get_embedder(self._embedder_spec or "local/all-MiniLM-L6-v2")
        return self._embedder

    @property
    def store(self) -> Any:
        """The long-term store (a SQLite file unless another store was given)."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    from tiermem.stores import SQLiteStore

                    self._store = SQLiteStore(
                        self._path, dimension=self.embedder.dimension, embedder=self.embedder
                    )
        return self._store

    @property
    def working(self) -> Any:
        """The in-process working memory (None when disabled)."""
        if self._working is None and self._use_working:
            with self._lock:
                if self._working is None:
                    from tiermem.working import WorkingMemory

                    self._working = WorkingMemory(
                        embedder=self.embedder, user_isolation=True, fifo_interval_min=None
                    )
        return self._working

    @property
    def archiver(self) -> Archiver:
        """The background writer of messages to the store."""
        if self._archiver is None:
            with self._lock:
                if self._archiver is None:
                    self._archiver = Archiver(self.store, self.embedder)
        return self._archiver

    def _new_buffer(self, user_id: str, session_id: str | None) -> BufferMemory:
        return BufferMemory(
            buffer_size=self._buffer_size,
            max_tokens=self._buffer_tokens,
            summarizer=self._summarizer,
            token_counter=self.token_counter,
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
        buffer = self.buffers.get(user_id, session_id)
        last = buffer.get_recent(1)
        previous = last[0].message_id if last else None
        buffer.extend(messages)
        if self.retention == "persistent":
            items = []
            for message in messages:
                items.append(ArchivedMessage(user_id, message, session_id, None, previous))
                previous = message.message_id
            self.archiver.submit(items)

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
        memory_id = self.store.add(
            _user(user_id),
            content,
            memory_type=memory_type,
            importance=importance,
            session_id=session_id,
            agent_id=agent_id,
            metadata=metadata,
        )
        return str(memory_id)

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
        return list(self.store.search(_user(user_id), query, mode=mode, limit=k, **(filters or {})))

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
        return self.planner.plan(
            query,
            max_tokens=max_tokens,
            recent=recent,
            candidates=candidates,
            summary=buffer.summary if buffer is not None else None,
            synopsis=None,
        )

    def _candidates(
        self, query: str, user_id: str, session_id: str | None, buffer: BufferMemory | None
    ) -> list[Candidate]:
        from tiermem.stores.base import SearchOp

        vector = self.embedder.embed([query])[0]
        pool = self.planner.settings.k
        by_id: dict[Any, Candidate] = {}
        vector_hits, keyword_hits = self.store.batch(
            [
                SearchOp(user_id, "vector", vector, None, pool),
                SearchOp(user_id, "keyword", None, query, pool),
            ]
        )
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
        if buffer is not None:
            for message, similarity in buffer.vector_search(vector, self.embedder, k=pool):
                line = transcript_line(message)
                candidates.append(
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
        return candidates

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
        self.buffers.drop_user(user_id, drain=False)
        if self._archiver is not None:
            self._archiver.discard_user(user_id)
            self._archiver.flush()
        if self._working is not None:
            self._working.clear(user_id)
        return int(self.store.delete_user(user_id))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued messages are archived; False on timeout."""
        if self._archiver is None:
            return True
        return self._archiver.flush(timeout)

    def close(self) -> None:
        """Archive what is queued and release the store, workers and threads."""
        if self._closed:
            return
        self._closed = True
        if self._archiver is not None:
            self._archiver.close()
        if self._working is not None:
            self._working.close()
        if self._store is not None:
            self._store.close()

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

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await asyncio.to_thread(self.close)


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
    )


__all__ = ["RETENTIONS", "Memory", "Retention"]
