"""The contract every face of tiermem implements: public types and two Protocols.

:class:`~tiermem.Memory` (in process), :class:`~tiermem.client.MemoryClient` and
:class:`~tiermem.client.AsyncMemoryClient` (over HTTP) implement :class:`MemoryAPI` or
:class:`AsyncMemoryAPI`, checked by mypy; the REST routes and the MCP tools are the same
operations. Code written against these Protocols runs on any face::

    def remember_preference(memory: MemoryAPI, user_id: str) -> None:
        memory.remember("Prefers tea.", user_id, memory_type="preference")

The same bad input raises the same :mod:`tiermem.errors` class on every face.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tiermem.messages import Content, Message
from tiermem.types import (
    MEMORY_TYPES,
    Context,
    ContextItem,
    Filters,
    MemoryRecord,
    SearchResult,
    SessionInfo,
    StoreStats,
    Synopsis,
    TranscriptRow,
    WorkStats,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack


@runtime_checkable
class MemoryAPI(Protocol):
    """Every operation a user of tiermem has, synchronous.

    Writes: :meth:`add`, :meth:`add_messages`, :meth:`remember`, :meth:`remember_many`,
    :meth:`update_memory`.
    Reads: :meth:`get_context`, :meth:`search`, :meth:`list_memories`, :meth:`get_memory`,
    :meth:`get_message`, :meth:`history`, :meth:`recent`, :meth:`sessions`,
    :meth:`session_summary`, :meth:`users`, :meth:`synopsis`, :meth:`facts`,
    :meth:`fact_history`, :meth:`stats`. Forgetting:
    :meth:`forget`, :meth:`forget_messages`, :meth:`forget_session`, :meth:`forget_user`.
    Moving data: :meth:`export`, :meth:`import_archive`. Lifecycle and work:
    :meth:`end_session`, :meth:`extract_facts`, :meth:`generate_synopsis`,
    :meth:`work_stats`, :meth:`failed`, :meth:`retry_failed`, :meth:`queue_status`,
    :meth:`health`, :meth:`flush`, :meth:`close`.
    """

    # -- writing --

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
        """Add one message of a conversation; durable when this returns."""
        ...

    def add_messages(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        user_id: str,
        session_id: str | None = None,
        *,
        agent_id: str | None = None,
    ) -> list[Message]:
        """Add a history, all or none."""
        ...

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
        """Store a fact, preference or other memory now; its id."""
        ...

    def remember_many(self, memories: Iterable[Mapping[str, Any]], user_id: str) -> list[str]:
        """Store several memories (dicts of :meth:`remember`'s arguments, ``created_at``
        optional) in one transaction, all or none; their ids, in order."""
        ...

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
        """Change a memory's content, type, importance or metadata; the new record."""
        ...

    # -- reading --

    def get_context(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        max_tokens: int | None = None,
    ) -> Context:
        """The context for ``query``, fitted to ``max_tokens`` and explained."""
        ...

    def search(
        self,
        query: str,
        user_id: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str = "hybrid",
        min_score: float = 0.0,
    ) -> list[SearchResult]:
        """The user's long-term memories best matching ``query``, best first; each
        hit's ``score`` is its relevance in [0, 1] (the same at every ``k``), and
        ``min_score`` leaves out those that score less."""
        ...

    def list_memories(
        self,
        user_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        **filters: Unpack[Filters],
    ) -> list[MemoryRecord]:
        """A page of the user's memories, newest first (``metadata``: top-level keys
        equal to these scalar values)."""
        ...

    def get_memory(self, memory_id: str, user_id: str) -> MemoryRecord | None:
        """One memory of the user; None if the user has none with this id."""
        ...

    def get_message(self, message_id: str, *, user_id: str) -> Message:
        """One message of the user, whole (a context marks a long message's excerpts with
        its id); MessageNotFoundError if the user has none with this id."""
        ...

    def history(self, user_id: str, session_id: str | None = None) -> list[Message]:
        """Every message of a session, in order, whole."""
        ...

    def recent(self, user_id: str, session_id: str | None = None, limit: int = 20) -> list[Message]:
        """The newest ``limit`` messages of a session, oldest first."""
        ...

    def sessions(self, user_id: str) -> list[SessionInfo]:
        """The user's sessions, most recently active first."""
        ...

    def session_summary(self, user_id: str, session_id: str | None = None) -> str | None:
        """The running summary of the session's messages older than the recent window
        (what a context offers as its summary); None while there is none."""
        ...

    def users(self, limit: int = 100, after: str = "") -> list[str]:
        """The users by id, in order, ``limit`` of them after ``after`` (the last id of
        the page before): every user of the store; with a tenant's key, the tenant's."""
        ...

    def synopsis(self, user_id: str) -> Synopsis:
        """The user's synopsis (cached; generated on a miss)."""
        ...

    def generate_synopsis(self, user_id: str) -> Synopsis:
        """Regenerate and cache the user's synopsis now."""
        ...

    def facts(self, user_id: str, *, current: bool = True, limit: int = 1000) -> list[MemoryRecord]:
        """Facts extracted from the user's conversations, newest first."""
        ...

    def fact_history(self, memory_id: str, user_id: str) -> list[MemoryRecord]:
        """Every version of a fact, oldest first."""
        ...

    def stats(self, user_id: str) -> StoreStats:
        """Counts per type, time span, access and importance figures of the user."""
        ...

    # -- forgetting --

    def forget(self, memory_id: str, user_id: str) -> bool:
        """Delete one memory and what was derived from it; False if there was none."""
        ...

    def forget_messages(self, user_id: str, message_ids: Iterable[str]) -> int:
        """Delete these messages of the user; how many went."""
        ...

    def forget_session(self, user_id: str, session_id: str | None = None) -> int:
        """Delete a session: its messages, summary and index lines."""
        ...

    def forget_user(self, user_id: str) -> int:
        """Erase everything of the user; how many long-term memories went."""
        ...

    # -- sessions, background work, lifecycle --

    def end_session(self, user_id: str, session_id: str | None = None) -> str | None:
        """Fold a session into its final summary; the summary."""
        ...

    def extract_facts(self, user_id: str, session_id: str | None = None) -> list[str]:
        """Extract facts from the session's unread messages now; the facts' ids."""
        ...

    def work_stats(self, user_id: str | None = None) -> WorkStats:
        """Messages pending, done and failed (one user's, or everyone's)."""
        ...

    def failed(self, user_id: str, limit: int = 100) -> list[TranscriptRow]:
        """The user's messages that could not be indexed, with their errors."""
        ...

    def retry_failed(self, user_id: str) -> int:
        """Queue the user's failed messages again; how many."""
        ...

    def queue_status(self) -> dict[str, Any]:
        """Messages queued in the serving process and not yet in the store (``memory``
        durability): ``pending``, ``failures`` (batches retried) and ``last_error``."""
        ...

    def health(self) -> dict[str, str]:
        """Whether each part (store, embedding model, cache) answers: ``"ok"`` or what
        failed, by part. Never raises (a readiness probe's view)."""
        ...

    # -- moving a user's data --

    def export(self, user_id: str, *, include_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """The user's archive (docs/export.md), one dict per JSON line."""
        ...

    def import_archive(
        self, archive: Iterable[str | bytes | Mapping[str, Any]], user_id: str | None = None
    ) -> dict[str, int]:
        """Restore an archive, all or nothing; what was added, by kind."""
        ...

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for queued and pending work; False on timeout."""
        ...

    def close(self, timeout: float | None = None) -> None:
        """Release what this face holds."""
        ...


@runtime_checkable
class AsyncMemoryAPI(Protocol):
    """:class:`MemoryAPI`'s operations as coroutines, each named with an ``a`` prefix."""

    async def aadd(
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
    ) -> Message: ...

    async def aadd_messages(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        user_id: str,
        session_id: str | None = None,
        *,
        agent_id: str | None = None,
    ) -> list[Message]: ...

    async def aremember(
        self,
        content: str,
        user_id: str,
        memory_type: str = "fact",
        importance: float = 0.5,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str: ...

    async def aremember_many(
        self, memories: Iterable[Mapping[str, Any]], user_id: str
    ) -> list[str]: ...

    async def aupdate_memory(
        self,
        memory_id: str,
        user_id: str,
        *,
        content: str | None = None,
        memory_type: str | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord: ...

    async def aget_context(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        max_tokens: int | None = None,
    ) -> Context: ...

    async def asearch(
        self,
        query: str,
        user_id: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str = "hybrid",
        min_score: float = 0.0,
    ) -> list[SearchResult]: ...

    async def alist_memories(
        self,
        user_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        **filters: Unpack[Filters],
    ) -> list[MemoryRecord]: ...

    async def aget_memory(self, memory_id: str, user_id: str) -> MemoryRecord | None: ...

    async def aget_message(self, message_id: str, *, user_id: str) -> Message: ...

    async def ahistory(self, user_id: str, session_id: str | None = None) -> list[Message]: ...

    async def arecent(
        self, user_id: str, session_id: str | None = None, limit: int = 20
    ) -> list[Message]: ...

    async def asessions(self, user_id: str) -> list[SessionInfo]: ...

    async def asession_summary(self, user_id: str, session_id: str | None = None) -> str | None: ...

    async def ausers(self, limit: int = 100, after: str = "") -> list[str]: ...

    async def asynopsis(self, user_id: str) -> Synopsis: ...

    async def agenerate_synopsis(self, user_id: str) -> Synopsis: ...

    async def afacts(
        self, user_id: str, *, current: bool = True, limit: int = 1000
    ) -> list[MemoryRecord]: ...

    async def afact_history(self, memory_id: str, user_id: str) -> list[MemoryRecord]: ...

    async def astats(self, user_id: str) -> StoreStats: ...

    async def aforget(self, memory_id: str, user_id: str) -> bool: ...

    async def aforget_messages(self, user_id: str, message_ids: Iterable[str]) -> int: ...

    async def aforget_session(self, user_id: str, session_id: str | None = None) -> int: ...

    async def aforget_user(self, user_id: str) -> int: ...

    async def aend_session(self, user_id: str, session_id: str | None = None) -> str | None: ...

    async def aextract_facts(self, user_id: str, session_id: str | None = None) -> list[str]: ...

    async def awork_stats(self, user_id: str | None = None) -> WorkStats: ...

    async def afailed(self, user_id: str, limit: int = 100) -> list[TranscriptRow]: ...

    async def aretry_failed(self, user_id: str) -> int: ...

    async def aqueue_status(self) -> dict[str, Any]: ...

    async def ahealth(self) -> dict[str, str]: ...

    def aexport(
        self, user_id: str, *, include_vectors: bool = False
    ) -> AsyncIterator[dict[str, Any]]: ...

    async def aimport_archive(
        self, archive: Iterable[str | bytes | Mapping[str, Any]], user_id: str | None = None
    ) -> dict[str, int]: ...

    async def aflush(self, timeout: float | None = None) -> bool: ...

    async def aclose(self, timeout: float | None = None) -> None: ...


def operations(protocol: type) -> list[str]:
    """The public operation names a Protocol declares (what every face must offer)."""
    return sorted(
        name
        for name, value in vars(protocol).items()
        if callable(value) and not name.startswith("_")
    )


__all__ = [
    "MEMORY_TYPES",
    "AsyncMemoryAPI",
    "Context",
    "ContextItem",
    "MemoryAPI",
    "MemoryRecord",
    "Message",
    "SearchResult",
    "SessionInfo",
    "StoreStats",
    "Synopsis",
    "TranscriptRow",
    "WorkStats",
    "operations",
]
