"""The MemoryStore protocol: the derived API every backend shares.

A backend implements two methods, :meth:`MemoryStore.batch` and :meth:`MemoryStore.abatch`,
which run a list of small operation tuples (:class:`~tiermem.stores.ops.AddOp`,
:class:`~tiermem.stores.ops.SearchOp`, ...) in one transaction and return one result per
operation. Everything else (``add``, ``search``, ``delete_user`` and their ``a``-prefixed
async twins) is derived here, so validation, embedding of text that comes without a vector
and result shaping are written once.
"""

from __future__ import annotations

import builtins
import uuid
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from tiermem.errors import DimensionMismatchError, InputError, InvalidSizeError, InvalidTypeError
from tiermem.stores.ops import (
    SEARCH_MODES,
    AccessOp,
    AddOp,
    CountOp,
    DeleteOp,
    DeleteUserOp,
    GetOp,
    ListOp,
    MemoryFilter,
    Op,
    SearchMode,
    SearchOp,
    StatsOp,
    UpdateOp,
    make_filter,
)
from tiermem.stores.queue import WorkQueue
from tiermem.stores.records import (
    DEFAULT_IMPORTANCE,
    MemoryRecord,
    NewMemory,
    ReplicaStatus,
    SearchResult,
    StoreStats,
)
from tiermem.stores.transcript_api import TranscriptAPI
from tiermem.stores.validate import (
    check_aware,
    check_content,
    check_importance,
    check_limit,
    check_memory_type,
    check_metadata,
    check_text_id,
    check_user_id,
    check_uuid,
    check_uuids,
    check_vector,
)

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder

_T = TypeVar("_T")


class MemoryStore(TranscriptAPI, WorkQueue):
    """Long-term memory of many users in one ``memories_{dimension}`` table.

    Subclasses implement :meth:`batch` and :meth:`abatch`; every other method is derived
    (the transcript's from :class:`~tiermem.stores.transcript_api.TranscriptAPI`, the work
    queue's from :class:`~tiermem.stores.queue.WorkQueue`). Every per-user
    method requires ``user_id`` and only ever sees that user's records.

    Args:
        dimension: width of the stored vectors; defaults to ``embedder.dimension``.
        embedder: optional; embeds content or queries given without a vector.
    """

    def __init__(self, dimension: int | None = None, embedder: Embedder | None = None) -> None:
        if dimension is None:
            if embedder is None:
                raise InputError("dimension", "is required", "pass dimension= or embedder=")
            dimension = embedder.dimension
        if (
            isinstance(dimension, bool)
            or not isinstance(dimension, int)
            or not 1 <= dimension <= 16_000
        ):
            raise InvalidSizeError("dimension", f"{dimension!r} is not in [1, 16000]")
        if embedder is not None and embedder.dimension != dimension:
            raise DimensionMismatchError(
                "embedder",
                f"{embedder.model_id} makes {embedder.dimension}-dimensional vectors, "
                f"the store holds {dimension}",
                "use a store of the embedder's dimension",
            )
        self.dimension = dimension
        self.embedder = embedder
        self.table = f"memories_{dimension}"

    # -- the core a backend implements --

    @abstractmethod
    def batch(self, ops: Iterable[Op]) -> list[Any]:
        """Run ``ops`` in one transaction; one result per op, in order.

        If any op fails, nothing of the batch is kept and the error is raised.
        """

    @abstractmethod
    async def abatch(self, ops: Iterable[Op]) -> list[Any]:
        """Async twin of :meth:`batch`."""

    @abstractmethod
    def close(self) -> None:
        """Release connections and caches; the store is unusable afterwards."""

    def replica_status(self) -> ReplicaStatus | None:
        """The read replica's state and lag; None for a store without one."""
        return None

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- op builders shared by the sync and async methods --

    def _new_memories(
        self,
        user_id: str,
        contents: Sequence[str | NewMemory],
        embeddings: Sequence[Any] | np.ndarray | None,
        defaults: dict[str, Any],
    ) -> tuple[list[NewMemory], list[int]]:
        """The validated memories of an add, and the positions of those to embed."""
        check_user_id(user_id)
        items = []
        for i, item in enumerate(contents):
            mem = item if isinstance(item, NewMemory) else NewMemory(content=item, **defaults)
            name = f"memories[{i}]"
            vec = mem.embedding
            if embeddings is not None:
                vec = embeddings[i]
            items.append(
                NewMemory(
                    content=check_content(mem.content, f"{name}.content"),
                    embedding=None
                    if vec is None
                    else check_vector(vec, self.dimension, f"{name}.embedding"),
                    memory_type=check_memory_type(mem.memory_type, f"{name}.memory_type"),
                    agent_id=check_text_id(mem.agent_id, f"{name}.agent_id"),
                    session_id=check_text_id(mem.session_id, f"{name}.session_id"),
                    importance=check_importance(mem.importance, f"{name}.importance"),
                    metadata=check_metadata(mem.metadata, f"{name}.metadata"),
                    created_at=check_aware(mem.created_at, f"{name}.created_at"),
                )
            )
        if embeddings is not None and len(embeddings) != len(contents):
            raise InputError(
                "embeddings", f"has {len(embeddings)} rows for {len(contents)} contents"
            )
        return items, self._needs_embedding(items)

    def _needs_embedding(self, items: Sequence[NewMemory]) -> list[int]:
        missing = [i for i, m in enumerate(items) if m.embedding is None]
        if missing and self.embedder is None:
            raise InputError(
                "embedding",
                "is missing and the store has no embedder",
                "pass embeddings or embedder=",
            )
        return missing

    def _fill(
        self, items: list[NewMemory], missing: list[int], vectors: np.ndarray
    ) -> list[NewMemory]:
        for row, i in enumerate(missing):
            items[i] = items[i]._replace(embedding=check_vector(vectors[row], self.dimension))
        return items

    def _search_op(
        self,
        user_id: str,
        query: str | None,
        vector: Any,
        mode: str,
        limit: int,
        flt: MemoryFilter,
        count_access: bool,
    ) -> SearchOp:
        check_user_id(user_id)
        if mode not in SEARCH_MODES:
            raise InputError("mode", f"{mode!r} is not a search mode", f"use one of {SEARCH_MODES}")
        if query is not None and not isinstance(query, str):
            raise InvalidTypeError("query", f"must be a str, got {type(query).__name__}")
        if mode in ("keyword", "hybrid") and not (query or "").strip():
            raise InputError("query", f"is required for {mode} search")
        vec = None if vector is None else check_vector(vector, self.dimension, "vector")
        if mode in ("vector", "hybrid") and vec is None:
            if query is None:
                raise InputError("vector", "vector search needs a vector or a query text")
            if self.embedder is None:
                raise InputError(
                    "vector", "is missing and the store has no embedder", "pass vector="
                )
        return SearchOp(user_id, mode, vec, query, check_limit(limit), flt, bool(count_access))

    def _update_op(self, user_id: str, memory_id: Any, fields: dict[str, Any]) -> UpdateOp:
        unknown = set(fields) - {"content", "embedding", "memory_type", "importance", "metadata"}
        if unknown:
            raise InputError(sorted(unknown)[0], "cannot be updated")
        check_user_id(user_id)
        content = fields.get("content")
        embedding = fields.get("embedding")
        op = UpdateOp(
            user_id=user_id,
            id=check_uuid(memory_id),
            content=None if content is None else check_content(content),
            embedding=None if embedding is None else check_vector(embedding, self.dimension),
            memory_type=None
            if fields.get("memory_type") is None
            else check_memory_type(fields["memory_type"]),
            importance=None
            if fields.get("importance") is None
            else check_importance(fields["importance"]),
            metadata=None if fields.get("metadata") is None else check_metadata(fields["metadata"]),
        )
        if op.content is not None and op.embedding is None and self.embedder is None:
            raise InputError(
                "embedding",
                "content changed but no embedding was given",
                "pass embedding= or embedder=",
            )
        return op

    def _list_op(self, user_id: str, limit: int, offset: int, filters: dict[str, Any]) -> ListOp:
        return ListOp(
            check_user_id(user_id),
            make_filter(**filters),
            check_limit(limit),
            check_limit(offset, "offset", 0),
        )

    # -- derived sync API --

    def add(
        self,
        user_id: str,
        content: str,
        *,
        embedding: Any = None,
        memory_type: str = "fact",
        agent_id: str | None = None,
        session_id: str | None = None,
        importance: float = DEFAULT_IMPORTANCE,
        metadata: Mapping[str, Any] | None = None,
    ) -> uuid.UUID:
        """Store one memory and return its id (the existing id if the content is known)."""
        mem = NewMemory(content, embedding, memory_type, agent_id, session_id, importance, metadata)
        return self.add_many(user_id, [mem])[0]

    def add_many(
        self,
        user_id: str,
        contents: Sequence[str | NewMemory],
        *,
        embeddings: Sequence[Any] | np.ndarray | None = None,
        **defaults: Any,
    ) -> list[uuid.UUID]:
        """Store many memories in one transaction; ids in input order.

        Args:
            user_id: owner of every memory.
            contents: texts, or :class:`NewMemory` tuples for per-item fields.
            embeddings: optional vectors, one per content; missing ones are embedded.
            **defaults: fields of :class:`NewMemory` applied to plain-text contents.
        """
        items, missing = self._new_memories(user_id, contents, embeddings, defaults)
        if missing:
            assert self.embedder is not None
            items = self._fill(
                items, missing, self.embedder.embed([items[i].content for i in missing])
            )
        return cast(list[uuid.UUID], self.batch([AddOp(user_id, tuple(items))])[0])

    def get(self, user_id: str, memory_id: uuid.UUID | str) -> MemoryRecord | None:
        """The memory with this id if it belongs to ``user_id``, else ``None``."""
        found = self.get_many(user_id, [memory_id])
        return found[0] if found else None

    def get_many(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> list[MemoryRecord]:
        """The user's memories among ``memory_ids`` (unknown ids are skipped)."""
        op = GetOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(list[MemoryRecord], self.batch([op])[0])

    def record_access(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Count one access of each of the user's memories ``memory_ids``; how many counted.

        For callers that search with ``count_access=False`` and use only some hits.
        """
        op = AccessOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(int, self.batch([op])[0])

    def search(
        self,
        user_id: str,
        query: str | None = None,
        *,
        vector: Any = None,
        mode: SearchMode = "vector",
        limit: int = 10,
        count_access: bool = True,
        **filters: Any,
    ) -> list[SearchResult]:
        """Search the user's memories, best first.

        Args:
            user_id: whose memories to search.
            query: text; embedded for vector search when ``vector`` is not given.
            vector: a precomputed query vector.
            mode: ``"vector"``, ``"keyword"`` (full text) or ``"hybrid"`` (both, fused by rank).
            limit: how many results at most.
            count_access: count an access of every hit (False: the search writes nothing).
            **filters: ``memory_type`` (str or list), ``session_id``, ``agent_id``,
                ``created_after``, ``created_before``, ``metadata`` (dict of equalities).
        """
        flt = make_filter(**filters)
        op = self._search_op(user_id, query, vector, mode, limit, flt, count_access)
        if op.vector is None and op.mode != "keyword":
            assert self.embedder is not None and query is not None
            op = op._replace(vector=check_vector(self.embedder.embed([query])[0], self.dimension))
        return cast(list[SearchResult], self.batch([op])[0])

    def update(self, user_id: str, memory_id: uuid.UUID | str, **fields: Any) -> MemoryRecord:
        """Change ``content``, ``embedding``, ``memory_type``, ``importance`` or ``metadata``.

        Raises:
            NotFoundError: no such memory for this user.
        """
        op = self._update_op(user_id, memory_id, fields)
        if op.content is not None and op.embedding is None:
            assert self.embedder is not None
            op = op._replace(
                embedding=check_vector(self.embedder.embed([op.content])[0], self.dimension)
            )
        return cast(MemoryRecord, self.batch([op])[0])

    def delete(self, user_id: str, memory_id: uuid.UUID | str) -> bool:
        """Delete one memory; ``False`` if the user has no memory with this id."""
        return self.delete_many(user_id, [memory_id]) == 1

    def delete_many(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Delete the user's memories among ``memory_ids``; how many were deleted."""
        op = DeleteOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(int, self.batch([op])[0])

    def delete_user(self, user_id: str) -> int:
        """Erase every memory of ``user_id``; how many were deleted."""
        return cast(int, self.batch([DeleteUserOp(check_user_id(user_id))])[0])

    def list(
        self, user_id: str, *, limit: int = 100, offset: int = 0, **filters: Any
    ) -> builtins.list[MemoryRecord]:
        """A page of the user's memories, newest first."""
        op = self._list_op(user_id, limit, offset, filters)
        return cast(builtins.list[MemoryRecord], self.batch([op])[0])

    def count(self, user_id: str, **filters: Any) -> int:
        """How many memories the user has (matching the filters)."""
        return cast(int, self.batch([CountOp(check_user_id(user_id), make_filter(**filters))])[0])

    def stats(self, user_id: str) -> StoreStats:
        """Counts per type, time span, access and importance figures of the user."""
        return cast(StoreStats, self.batch([StatsOp(check_user_id(user_id))])[0])

    # -- derived async API (same validation, async embedding, abatch) --

    async def aadd(
        self,
        user_id: str,
        content: str,
        *,
        embedding: Any = None,
        memory_type: str = "fact",
        agent_id: str | None = None,
        session_id: str | None = None,
        importance: float = DEFAULT_IMPORTANCE,
        metadata: Mapping[str, Any] | None = None,
    ) -> uuid.UUID:
        """Async twin of :meth:`add`."""
        mem = NewMemory(content, embedding, memory_type, agent_id, session_id, importance, metadata)
        return (await self.aadd_many(user_id, [mem]))[0]

    async def aadd_many(
        self,
        user_id: str,
        contents: Sequence[str | NewMemory],
        *,
        embeddings: Sequence[Any] | np.ndarray | None = None,
        **defaults: Any,
    ) -> builtins.list[uuid.UUID]:
        """Async twin of :meth:`add_many`."""
        items, missing = self._new_memories(user_id, contents, embeddings, defaults)
        if missing:
            assert self.embedder is not None
            vectors = await self.embedder.aembed([items[i].content for i in missing])
            items = self._fill(items, missing, vectors)
        return cast(
            builtins.list[uuid.UUID], (await self.abatch([AddOp(user_id, tuple(items))]))[0]
        )

    async def aget(self, user_id: str, memory_id: uuid.UUID | str) -> MemoryRecord | None:
        """Async twin of :meth:`get`."""
        found = await self.aget_many(user_id, [memory_id])
        return found[0] if found else None

    async def aget_many(
        self, user_id: str, memory_ids: Sequence[uuid.UUID | str]
    ) -> builtins.list[MemoryRecord]:
        """Async twin of :meth:`get_many`."""
        op = GetOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(builtins.list[MemoryRecord], (await self.abatch([op]))[0])

    async def arecord_access(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Async twin of :meth:`record_access`."""
        op = AccessOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(int, (await self.abatch([op]))[0])

    async def asearch(
        self,
        user_id: str,
        query: str | None = None,
        *,
        vector: Any = None,
        mode: SearchMode = "vector",
        limit: int = 10,
        count_access: bool = True,
        **filters: Any,
    ) -> builtins.list[SearchResult]:
        """Async twin of :meth:`search`."""
        flt = make_filter(**filters)
        op = self._search_op(user_id, query, vector, mode, limit, flt, count_access)
        if op.vector is None and op.mode != "keyword":
            assert self.embedder is not None and query is not None
            vec = (await self.embedder.aembed([query]))[0]
            op = op._replace(vector=check_vector(vec, self.dimension))
        return cast(builtins.list[SearchResult], (await self.abatch([op]))[0])

    async def aupdate(
        self, user_id: str, memory_id: uuid.UUID | str, **fields: Any
    ) -> MemoryRecord:
        """Async twin of :meth:`update`."""
        op = self._update_op(user_id, memory_id, fields)
        if op.content is not None and op.embedding is None:
            assert self.embedder is not None
            vec = (await self.embedder.aembed([op.content]))[0]
            op = op._replace(embedding=check_vector(vec, self.dimension))
        return cast(MemoryRecord, (await self.abatch([op]))[0])

    async def adelete(self, user_id: str, memory_id: uuid.UUID | str) -> bool:
        """Async twin of :meth:`delete`."""
        return (await self.adelete_many(user_id, [memory_id])) == 1

    async def adelete_many(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> int:
        """Async twin of :meth:`delete_many`."""
        op = DeleteOp(check_user_id(user_id), check_uuids(memory_ids))
        return cast(int, (await self.abatch([op]))[0])

    async def adelete_user(self, user_id: str) -> int:
        """Async twin of :meth:`delete_user`."""
        return cast(int, (await self.abatch([DeleteUserOp(check_user_id(user_id))]))[0])

    async def alist(
        self, user_id: str, *, limit: int = 100, offset: int = 0, **filters: Any
    ) -> builtins.list[MemoryRecord]:
        """Async twin of :meth:`list`."""
        op = self._list_op(user_id, limit, offset, filters)
        return cast(builtins.list[MemoryRecord], (await self.abatch([op]))[0])

    async def acount(self, user_id: str, **filters: Any) -> int:
        """Async twin of :meth:`count`."""
        return cast(
            int, (await self.abatch([CountOp(check_user_id(user_id), make_filter(**filters))]))[0]
        )

    async def astats(self, user_id: str) -> StoreStats:
        """Async twin of :meth:`stats`."""
        return cast(StoreStats, (await self.abatch([StatsOp(check_user_id(user_id))]))[0])
