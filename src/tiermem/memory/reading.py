"""Memory's reads and their async twins: search, context, a page, one memory.

Each read is written once, as its checks, its store call and what it makes of the
answer; the sync method calls the store's sync API, the async twin the store's async
one. On a store that reads natively in async calls (PostgreSQL with
``memory.persistent.native_async``) an async read leaves the event loop only to embed
(CPU); on any other store the twin runs the sync method in a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from functools import partial
from typing import Any

from typing_extensions import Unpack

from tiermem.errors import InvalidTypeError
from tiermem.memory.operations import Operations
from tiermem.memory.retrieval import PlannerInputs, Retriever
from tiermem.planner import Context, QueryPlanner
from tiermem.stores.ops import Filters
from tiermem.stores.records import MemoryRecord, SearchResult
from tiermem.stores.validate import check_encodable, check_text_id, check_user_id


class Reading(Operations):
    """The reads of :class:`~tiermem.memory.Memory`, sync and async."""

    _retriever: Retriever
    planner: QueryPlanner

    # -- search ------------------------------------------------------------------------------

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
        self._check_search(query, user_id, filters)
        vector = self._embed(query) if mode != "keyword" and query.strip() else None
        return list(
            self._tiers.store.search(
                user_id, query, vector=vector, mode=mode, limit=k, **(filters or {})
            )
        )

    async def asearch(
        self,
        query: str,
        user_id: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str = "hybrid",
    ) -> list[SearchResult]:
        """Async twin of :meth:`search` (on PostgreSQL only the query's embedding takes a
        thread; each hit is counted as an access in the same transaction)."""
        if not self._tiers.native_async:
            return await asyncio.to_thread(self.search, query, user_id, k, filters, mode=mode)
        self._check_search(query, user_id, filters)
        vector = None
        if mode != "keyword" and query.strip():
            vector = await asyncio.to_thread(self._embed, query)
        found = await self._tiers.store.asearch(
            user_id, query, vector=vector, mode=mode, limit=k, **(filters or {})
        )
        return list(found)

    def _check_search(self, query: str, user_id: str, filters: Any) -> None:
        self._check_query(query, user_id)
        if filters is not None and not isinstance(filters, Mapping):
            raise InvalidTypeError("filters", f"expected a dict, got {type(filters).__name__}")

    # -- context -----------------------------------------------------------------------------

    def get_context(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        max_tokens: int | None = None,
    ) -> Context:
        """The context for ``query``: recent messages, relevant memories, summary and
        synopsis, ranked, deduplicated and fitted to ``max_tokens``."""
        self._check_query(query, user_id)
        check_text_id(session_id, "session_id")
        found = self._retriever.gather(query, user_id, session_id)
        return self._fit(query, user_id, max_tokens, found)

    async def aget_context(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        max_tokens: int | None = None,
    ) -> Context:
        """Async twin of :meth:`get_context`. On PostgreSQL the store's reads and searches
        are awaited on its async connections; one thread ranks and plans, and a model
        embeds a query it has not seen (see
        :meth:`~tiermem.memory.retrieval.Retriever.agather`)."""
        if not self._tiers.native_async:
            return await asyncio.to_thread(self.get_context, query, user_id, session_id, max_tokens)
        self._check_query(query, user_id)
        check_text_id(session_id, "session_id")
        # planning is CPU (ranking, token counts): in the thread that makes the candidates,
        # so the loop keeps answering the other requests' statements meanwhile
        return await self._retriever.agather(
            query, user_id, session_id, partial(self._fit, query, user_id, max_tokens)
        )

    def _fit(
        self, query: str, user_id: str, max_tokens: int | None, found: PlannerInputs
    ) -> Context:
        """The planner's context of ``found``; the memories it used are counted as
        accessed (queued: written in batches, off the caller's path)."""
        context = self.planner.plan(
            query,
            max_tokens=max_tokens,
            recent=found.recent,
            candidates=found.candidates,
            summary=found.summary,
            synopsis=found.synopsis,
        )
        used = [i.memory_id for i in context.items if i.memory_id is not None]
        if used and not self._tiers.closed:
            self._tiers.accesses.record(user_id, used)
        return context

    def _check_query(self, query: str, user_id: str) -> None:
        self._open(user_id)
        if not isinstance(query, str):
            raise InvalidTypeError("query", f"expected str, got {type(query).__name__}")
        check_encodable(query, "query")

    def _embed(self, text: str) -> Any:
        """One text's vector (an embedder's own exception becomes a ProviderError)."""
        return self._tiers.embed([text])[0]

    # -- records ---------------------------------------------------------------------------

    def list_memories(
        self,
        user_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        **filters: Unpack[Filters],
    ) -> list[MemoryRecord]:
        """A page of the user's long-term memories, newest first, filtered by type (one or
        several), session, agent, creation time or metadata (:class:`Filters`)."""
        user_id = self._page(user_id)
        return list(self._tiers.store.list(user_id, limit=limit, offset=offset, **filters))

    async def alist_memories(
        self,
        user_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        **filters: Unpack[Filters],
    ) -> list[MemoryRecord]:
        """Async twin of :meth:`list_memories` (no thread on PostgreSQL)."""
        user_id = self._page(user_id)
        if not self._tiers.native_async:
            return await asyncio.to_thread(
                self.list_memories, user_id, limit=limit, offset=offset, **filters
            )
        return list(await self._tiers.store.alist(user_id, limit=limit, offset=offset, **filters))

    def _page(self, user_id: str) -> str:
        """The checked user of a page of memories."""
        self._tiers.check_open()
        return check_user_id(user_id)

    def get_memory(self, memory_id: str, user_id: str) -> MemoryRecord | None:
        """One memory of the user; None if the user has none with this id."""
        user_id = self._open(user_id)
        return self._tiers.store.get(user_id, memory_id)  # type: ignore[no-any-return]

    async def aget_memory(self, memory_id: str, user_id: str) -> MemoryRecord | None:
        """Async twin of :meth:`get_memory` (no thread on PostgreSQL)."""
        user_id = self._open(user_id)
        if not self._tiers.native_async:
            return await asyncio.to_thread(self.get_memory, memory_id, user_id)
        return await self._tiers.store.aget(user_id, memory_id)  # type: ignore[no-any-return]
