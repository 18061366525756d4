"""Memory's reads and their async twins: search, context, a page, one memory, one message.

Each read is written once, as its checks, its store call and what it makes of the
answer (:func:`~tiermem.aio.twins.stepped`: a generator of its waits); the sync method
calls the store's sync API, the async twin the store's async one. On a store that reads
natively in async calls (PostgreSQL with ``memory.persistent.native_async``) an async
read leaves the event loop only for CPU work (embedding, planning: a context's reads go
with its planning, in one round trip from that thread); on any other store the twin runs
the sync method in a thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, cast

from typing_extensions import Unpack

from tiermem.aio.twins import Call, Calls, Steps, stepped, stepped_twin
from tiermem.errors import InvalidTypeError, MessageNotFoundError
from tiermem.memory.operations import Operations
from tiermem.memory.retrieval import PlannerInputs, Retriever
from tiermem.messages import Message
from tiermem.planner.planner import QueryPlanner
from tiermem.stores.relevance import rescore
from tiermem.types.checks import (
    check_encodable,
    check_limit,
    check_max_tokens,
    check_message_id,
    check_min_score,
    check_text_id,
    check_user_id,
)
from tiermem.types.context import Context
from tiermem.types.filters import Filters, check_search_filters
from tiermem.types.records import MemoryRecord, SearchResult


def reads_natively(memory: Any) -> bool:
    """Whether ``memory``'s store reads natively in async calls (else an async read runs
    whole in a thread)."""
    return bool(memory._tiers.native_async)


class Reading(Calls, Operations):
    """The reads of :class:`~tiermem.memory.Memory`, sync and async."""

    _retriever: Retriever
    planner: QueryPlanner

    # -- search ------------------------------------------------------------------------------

    @stepped
    def search(
        self,
        query: str,
        user_id: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str = "hybrid",
        min_score: float = 0.0,
    ) -> Steps[list[SearchResult]]:
        """Search the user's long-term memories (hybrid by default), best first (async: on
        PostgreSQL only the query's embedding takes a thread; each hit is counted as an
        access in the same transaction).

        Each hit's ``score`` is its relevance to the query in [0, 1], from the query and
        the memory alone (the same at every ``k``): see :mod:`tiermem.stores.relevance`;
        its ``evidence`` says what it was made of. ``mode`` chooses where the hits come
        from: ``hybrid`` the nearest by meaning and the best by words, ``vector`` the
        ``k`` nearest by meaning, ``keyword`` the ``k`` best by words (the query is not
        embedded: they are scored by their keywords alone). ``min_score`` leaves out the
        hits that score less (0.2 keeps nearly all that answers a question and leaves out
        what is unrelated: docs/stores.md, Scores)."""
        self._check_search(query, user_id, k, filters)
        least = check_min_score(min_score)
        vector = (yield _cpu(self._embed, query)) if mode != "keyword" and query.strip() else None
        index = self._tiers.store.index
        options = {"vector": vector, "mode": mode, "limit": k, **(filters or {})}
        hits = list((yield Call(index.search, index.asearch, user_id, query, **options)))
        if mode != "hybrid":  # scored by cosine or text rank: scored by relevance instead
            hits = rescore(query, vector, hits, mode)
        return [hit for hit in hits if hit.score >= least]

    asearch = stepped_twin(search, threads_unless=reads_natively)

    def _check_search(self, query: str, user_id: str, k: Any, filters: Any) -> None:
        self._check_query(query, user_id)
        check_limit(k, "k")
        if filters is not None:
            check_search_filters(filters)

    # -- context -----------------------------------------------------------------------------

    @stepped
    def get_context(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        max_tokens: int | None = None,
    ) -> Steps[Context]:
        """The context for ``query``: recent messages, relevant memories, summary and
        synopsis, ranked, deduplicated and fitted to ``max_tokens``. Async: on PostgreSQL
        one thread sends the store's reads and searches in one round trip, decodes their
        rows, ranks and plans, and a model embeds a query it has not seen (see
        :meth:`~tiermem.memory.retrieval.Retriever.gather`)."""
        self._check_query(query, user_id)
        check_text_id(session_id, "session_id")
        check_max_tokens(max_tokens)
        retriever = self._retriever
        # planning is CPU (ranking, token counts): an async read runs it in the thread
        # that makes the candidates, so the loop answers other requests' statements meanwhile
        fit = partial(self._fit, query, user_id, max_tokens)
        wait = Call(retriever.gather, retriever.agather, query, user_id, session_id, fit)
        return cast(Context, (yield wait))

    aget_context = stepped_twin(get_context, threads_unless=reads_natively)

    def _fit(
        self, query: str, user_id: str, max_tokens: int | None, found: PlannerInputs
    ) -> Context:
        """The planner's context of ``found`` (with what was down while it was gathered);
        the memories it used are counted as accessed (queued: written in batches, off
        the caller's path)."""
        context = self.planner.plan(
            query,
            max_tokens=max_tokens,
            recent=found.recent,
            candidates=found.candidates,
            summary=found.summary,
            synopsis=found.synopsis,
            rerank=self._tiers.rerank,
        )
        context.degraded = found.degraded
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

    @stepped
    def list_memories(
        self,
        /,
        user_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        **filters: Unpack[Filters],
    ) -> Steps[list[MemoryRecord]]:
        """A page of the user's long-term memories, newest first, filtered by type (one or
        several), session, agent, creation time or metadata (:class:`Filters`)."""
        user_id = self._page(user_id)
        index = self._tiers.store.index
        page = Call(index.list, index.alist, user_id, limit=limit, offset=offset, **filters)
        return list((yield page))

    alist_memories = stepped_twin(list_memories, threads_unless=reads_natively)

    def _page(self, user_id: str) -> str:
        """The checked user of a page of memories."""
        self._tiers.check_open()
        return check_user_id(user_id)

    @stepped
    def get_memory(self, memory_id: str, user_id: str) -> Steps[MemoryRecord | None]:
        """One memory of the user; None if the user has none with this id."""
        user_id = self._open(user_id)
        index = self._tiers.store.index
        return cast(MemoryRecord | None, (yield Call(index.get, index.aget, user_id, memory_id)))

    aget_memory = stepped_twin(get_memory, threads_unless=reads_natively)

    @stepped
    def get_message(self, message_id: str, *, user_id: str) -> Steps[Message]:
        """One message of the user, whole and as it was added (role, content, name, tool
        calls, metadata, timestamp...): the context shows a long message's passages, each
        marked with its message's id, and this gives the whole message.

        With ``session`` or ``single_run`` retention only messages still in this
        process's buffers are found.

        Raises:
            MessageNotFoundError: the user has no message with this id (another user's
                message is not found either).
            InvalidTypeError: ``message_id`` is not a str.
        """
        user_id = self._open(user_id)
        message_id = check_message_id(message_id)
        keep = self._keep
        found = yield Call(keep.message, keep.amessage, user_id, message_id)
        if found is None:
            raise MessageNotFoundError(f"message {message_id!r} not found for this user_id")
        return cast(Message, found)

    aget_message = stepped_twin(get_message, threads_unless=reads_natively)


def _cpu(work: Callable[..., Any], *args: Any) -> Call:
    """A wait on CPU work (an embedding, planning): in a thread for an async read."""
    return Call(work, None, *args)
