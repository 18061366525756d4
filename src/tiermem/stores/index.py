"""The memory index, a part of every store: its methods, derived from the store's batch.

Each method (``add``, ``search``, ``delete_user``... and their ``a``-prefixed async twins)
checks its arguments into one op of :mod:`tiermem.stores.ops` (:class:`~.ops.AddOp`,
:class:`~.ops.SearchOp`, ...) that the store runs, so validation, embedding of text that
comes without a vector and result shaping are written once for every backend.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.errors import InputError, InvalidTypeError
from tiermem.stores.ops import (
    SEARCH_MODES,
    AccessOp,
    AddOp,
    CountOp,
    DeleteOp,
    DeleteUserOp,
    GetOp,
    ListOp,
    SearchMode,
    SearchOp,
    StatsOp,
    UpdateOp,
)
from tiermem.stores.parts import Batches, Part
from tiermem.stores.records import NewMemory
from tiermem.stores.validate import check_vector
from tiermem.types.checks import (
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
)
from tiermem.types.filters import MemoryFilter, make_filter
from tiermem.types.records import DEFAULT_IMPORTANCE, MemoryRecord, SearchResult, StoreStats

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder


class MemoryIndex(Part):
    """The memory index of a store: many users' memories (and passages) in one
    ``memories_{dimension}`` table, searched by meaning and by words.

    Every method checks its arguments into one op of :mod:`tiermem.stores.ops` and the
    store runs it; each has an ``a``-prefixed async twin. Every per-user method requires
    ``user_id`` and only ever sees that user's records.

    Args:
        store: what runs the ops (the store holding this index).
        dimension: width of the stored vectors.
        embedder: optional; embeds content or queries given without a vector.
    """

    def __init__(self, store: Batches, dimension: int, embedder: Embedder | None) -> None:
        super().__init__(store)
        self.dimension = dimension
        self.embedder = embedder

    # -- op builders and steps shared by the derived methods --

    def _add_many(
        self,
        user_id: str,
        contents: Sequence[str | NewMemory],
        embeddings: Sequence[Any] | np.ndarray | None,
        defaults: dict[str, Any],
    ) -> Steps[list[uuid.UUID]]:
        """An add: the memories checked, those without a vector embedded, then added."""
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
        missing = self._needs_embedding(items)
        if missing:
            vectors = yield Embed([items[i].content for i in missing])
            items = self._fill(items, missing, vectors)
        return cast(list[uuid.UUID], (yield AddOp(user_id, tuple(items))))

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

    # -- derived API: each method written once, run by batch and, as its twin, by abatch --

    def _step(self, step: Any, /) -> Any:
        """Run one wait of a derived method: texts to embed, or an op."""
        if isinstance(step, Embed):
            assert self.embedder is not None
            return self.embedder.embed(step.texts)
        return super()._step(step)

    async def _astep(self, step: Any, /) -> Any:
        if isinstance(step, Embed):
            assert self.embedder is not None
            return await self.embedder.aembed(step.texts)
        return await super()._astep(step)

    @stepped
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
    ) -> Steps[uuid.UUID]:
        """Store one memory and return its id (the existing id if the content is known)."""
        mem = NewMemory(content, embedding, memory_type, agent_id, session_id, importance, metadata)
        ids = yield from self._add_many(user_id, [mem], None, {})
        return ids[0]

    aadd = stepped_twin(add)

    @stepped
    def add_many(
        self,
        /,
        user_id: str,
        contents: Sequence[str | NewMemory],
        *,
        embeddings: Sequence[Any] | np.ndarray | None = None,
        **defaults: Any,
    ) -> Steps[builtins.list[uuid.UUID]]:
        """Store many memories in one transaction; ids in input order.

        Args:
            user_id: owner of every memory.
            contents: texts, or :class:`NewMemory` tuples for per-item fields.
            embeddings: optional vectors, one per content; missing ones are embedded.
            **defaults: fields of :class:`NewMemory` applied to plain-text contents.
        """
        return (yield from self._add_many(user_id, contents, embeddings, defaults))

    aadd_many = stepped_twin(add_many)

    @stepped
    def get(self, user_id: str, memory_id: uuid.UUID | str) -> Steps[MemoryRecord | None]:
        """The memory with this id if it belongs to ``user_id``, else ``None``."""
        found: builtins.list[MemoryRecord] = yield GetOp(
            check_user_id(user_id), check_uuids([memory_id])
        )
        return found[0] if found else None

    aget = stepped_twin(get)

    @stepped
    def get_many(
        self, user_id: str, memory_ids: Sequence[uuid.UUID | str]
    ) -> Steps[builtins.list[MemoryRecord]]:
        """The user's memories among ``memory_ids`` (unknown ids are skipped)."""
        return cast(
            builtins.list[MemoryRecord],
            (yield GetOp(check_user_id(user_id), check_uuids(memory_ids))),
        )

    aget_many = stepped_twin(get_many)

    @stepped
    def record_access(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> Steps[int]:
        """Count one access of each of the user's memories ``memory_ids``; how many counted.

        For callers that search with ``count_access=False`` and use only some hits.
        """
        return cast(int, (yield AccessOp(check_user_id(user_id), check_uuids(memory_ids))))

    arecord_access = stepped_twin(record_access)

    @stepped
    def search(
        self,
        /,
        user_id: str,
        query: str | None = None,
        *,
        vector: Any = None,
        mode: SearchMode = "vector",
        limit: int = 10,
        count_access: bool = True,
        **filters: Any,
    ) -> Steps[builtins.list[SearchResult]]:
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
            assert query is not None
            vectors = yield Embed([query])
            op = op._replace(vector=check_vector(vectors[0], self.dimension))
        return cast(builtins.list[SearchResult], (yield op))

    asearch = stepped_twin(search)

    @stepped
    def update(
        self, /, user_id: str, memory_id: uuid.UUID | str, **fields: Any
    ) -> Steps[MemoryRecord]:
        """Change ``content``, ``embedding``, ``memory_type``, ``importance`` or ``metadata``.

        Raises:
            NotFoundError: no such memory for this user.
        """
        op = self._update_op(user_id, memory_id, fields)
        if op.content is not None and op.embedding is None:
            vectors = yield Embed([op.content])
            op = op._replace(embedding=check_vector(vectors[0], self.dimension))
        return cast(MemoryRecord, (yield op))

    aupdate = stepped_twin(update)

    @stepped
    def delete(self, user_id: str, memory_id: uuid.UUID | str) -> Steps[bool]:
        """Delete one memory; ``False`` if the user has no memory with this id."""
        deleted: int = yield DeleteOp(check_user_id(user_id), check_uuids([memory_id]))
        return deleted == 1

    adelete = stepped_twin(delete)

    @stepped
    def delete_many(self, user_id: str, memory_ids: Sequence[uuid.UUID | str]) -> Steps[int]:
        """Delete the user's memories among ``memory_ids``; how many were deleted."""
        return cast(int, (yield DeleteOp(check_user_id(user_id), check_uuids(memory_ids))))

    adelete_many = stepped_twin(delete_many)

    @stepped
    def delete_user(self, user_id: str) -> Steps[int]:
        """Erase every memory of ``user_id``; how many were deleted."""
        return cast(int, (yield DeleteUserOp(check_user_id(user_id))))

    adelete_user = stepped_twin(delete_user)

    @stepped
    def list(
        self, /, user_id: str, *, limit: int = 100, offset: int = 0, **filters: Any
    ) -> Steps[builtins.list[MemoryRecord]]:
        """A page of the user's memories, newest first."""
        return cast(
            builtins.list[MemoryRecord], (yield self._list_op(user_id, limit, offset, filters))
        )

    alist = stepped_twin(list)

    @stepped
    def count(self, /, user_id: str, **filters: Any) -> Steps[int]:
        """How many memories the user has (matching the filters)."""
        return cast(int, (yield CountOp(check_user_id(user_id), make_filter(**filters))))

    acount = stepped_twin(count)

    @stepped
    def stats(self, user_id: str) -> Steps[StoreStats]:
        """Counts per type, time span, access and importance figures of the user."""
        return cast(StoreStats, (yield StatsOp(check_user_id(user_id))))

    astats = stepped_twin(stats)


class Embed(NamedTuple):
    """A derived method's wait for the store's embedder: the vectors of ``texts``."""

    texts: builtins.list[str]
