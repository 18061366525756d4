"""Cross-agent memory (seed 004): SharedMemoryPool and CoordinatedMemorySystem.

Both keep each agent's own conversation apart (one :class:`ConversationMemory` per
agent name) and a log of what agents share with each other: insights for the pool,
facts for the coordinated system. Given a :class:`~tiermem.Memory` and a ``user_id``,
shared items are also written to the long-term store (``memory_type="fact"``, the agent
as ``agent_id``) and read back by a new instance, and queries pick the shared items
relevant to a task by semantic search instead of sending them all: the memory's own
vector search over the stored items, or, without a memory or with an explicit
``embedder``, vectors kept in process.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from tiermem.aio.twins import Call, Calls, Steps, stepped, stepped_twin
from tiermem.errors import InputError, MissingUserError
from tiermem.messages import Message
from tiermem.patterns.conversation import ConversationMemory, check_message, check_name
from tiermem.patterns.vectors import (
    MessageVectors,
    check_k,
    check_query,
    check_text,
    default_embedder,
)
from tiermem.types.checks import MAX_LIMIT

if TYPE_CHECKING:
    from tiermem.api import MemoryAPI


class SharedLog(Calls):
    """Items agents share: in memory, optionally in the long-term store, searchable.

    Args:
        kind: the ``metadata.shared`` tag of stored items (``"insight"``, ``"fact"``).
        memory: optional :class:`~tiermem.Memory` (or client) that stores the items.
        user_id: owner of the stored items (required with ``memory``).
        embedder: for :meth:`relevant` in process; default: the memory's vector search,
            else MiniLM.
    """

    def __init__(
        self,
        kind: str,
        memory: MemoryAPI | None = None,
        user_id: str | None = None,
        embedder: Any = None,
    ) -> None:
        if memory is not None and (not isinstance(user_id, str) or not user_id.strip()):
            raise MissingUserError(
                "user_id", "is required with memory=", "shared items are stored per user"
            )
        self.kind = kind
        self.memory = memory
        self.user_id = user_id
        self._embedder = embedder
        self._vectors: MessageVectors | None = None
        self.items: list[Message] = []
        self._stored: dict[str, str] = {}
        """The memory id of each item's message id (items kept by ``memory``)."""
        self._lock = threading.Lock()
        if memory is not None:
            self._load()

    def _load(self) -> None:
        assert self.memory is not None and self.user_id is not None
        records = self.memory.list_memories(
            self.user_id, limit=MAX_LIMIT, memory_type="fact", metadata={"shared": self.kind}
        )
        for record in reversed(records):  # the store lists newest first
            message = self._message(record.content, record.agent_id or "", record.created_at)
            self._stored[message.message_id] = str(record.id)
            self.items.append(message)

    def _message(self, content: str, agent: str, timestamp: Any = None) -> Message:
        raise NotImplementedError

    def add(self, agent_name: str, text: str) -> Message:
        """Record ``text`` shared by ``agent_name`` (stored first when there is a store)."""
        check_name(agent_name, "agent_name")
        check_text(text, "text", "share some text")
        message = self._message(text, agent_name)
        if self.memory is not None:
            assert self.user_id is not None
            memory_id = self.memory.remember(
                text,
                self.user_id,
                "fact",
                0.7,
                agent_id=agent_name,
                metadata={"shared": self.kind},
            )
            with self._lock:
                self._stored[message.message_id] = memory_id
        with self._lock:
            self.items.append(message)
        return message

    def snapshot(self) -> list[Message]:
        with self._lock:
            return list(self.items)

    @property
    def vectors(self) -> MessageVectors:
        """The in-process vectors (used without a memory, or with an explicit embedder)."""
        if self._vectors is None:
            self._vectors = MessageVectors(self._embedder or default_embedder())
        return self._vectors

    def _searched(self) -> bool:
        """Whether :meth:`relevant` asks the memory (its stored vectors) to search."""
        return self.memory is not None and self._embedder is None

    def _search(self, query: str, k: int) -> list[Message]:
        """The items among the ``k`` stored ones closest to ``query`` (the memory's vector
        search), in the order they were shared."""
        assert self.memory is not None and self.user_id is not None
        check_query(query)
        if check_k(k) == 0:
            return []
        filters = {"memory_type": "fact", "metadata": {"shared": self.kind}}
        hits = self.memory.search(query, self.user_id, min(k, MAX_LIMIT), filters, mode="vector")
        ids = {str(h.record.id) for h in hits}
        with self._lock:
            return [m for m in self.items if self._stored.get(m.message_id) in ids]

    @stepped
    def relevant(self, query: str, k: int) -> Steps[list[Message]]:
        """The ``k`` items most similar to ``query``, in the order they were shared."""
        if self._searched():  # the memory's search (awaited: off the event loop)
            return cast(list[Message], (yield Call(self._search, None, query, k)))
        items, vectors = self.snapshot(), self.vectors
        yield Call(vectors.ensure, vectors.aensure, items)
        vector = yield Call(vectors.query_vector, vectors.aquery_vector, query)
        hits = {i for i, _ in vectors.search(vector, k, among=[m.message_id for m in items])}
        return [m for m in items if m.message_id in hits]

    arelevant = stepped_twin(relevant)


class _Insights(SharedLog):
    def _message(self, content: str, agent: str, timestamp: Any = None) -> Message:
        extra = {} if timestamp is None else {"timestamp": timestamp}
        return Message(
            role="system",
            content=f"[Shared by {agent}]: {content}",
            metadata={"shared": True, "source": agent},
            **extra,
        )


class _Facts(SharedLog):
    def _message(self, content: str, agent: str, timestamp: Any = None) -> Message:
        extra = {} if timestamp is None else {"timestamp": timestamp}
        return Message(role="system", content=content, metadata={"discovered_by": agent}, **extra)


class _AgentMemories:
    """One conversation per agent name (shared by the pool and the coordinated system)."""

    agent_memories: dict[str, ConversationMemory]

    def get_agent_memory(self, agent_name: str) -> ConversationMemory:
        """The conversation of ``agent_name``, created on first use."""
        check_name(agent_name, "agent_name")
        return self.agent_memories.setdefault(agent_name, ConversationMemory())

    register_agent = get_agent_memory


class SharedMemoryPool(Calls, _AgentMemories):
    """Insights shared with every agent, and broadcasts to every agent's memory.

    Args:
        memory, user_id: store insights in the long-term memory of ``user_id`` (optional).
        embedder: for ``get_shared_context(query=...)``.
    """

    def __init__(
        self, memory: MemoryAPI | None = None, user_id: str | None = None, embedder: Any = None
    ) -> None:
        self.global_memory = ConversationMemory()
        self.agent_memories: dict[str, ConversationMemory] = {}
        self._insights = _Insights("insight", memory, user_id, embedder)
        self._lock = threading.Lock()

    @property
    def shared_insights(self) -> list[Message]:
        """Every insight shared so far, oldest first (a copy)."""
        return self._insights.snapshot()

    def share_insight(self, agent_name: str, insight: str) -> Message:
        """Share ``insight`` from ``agent_name`` with all agents; returns its message."""
        return self._insights.add(agent_name, insight)

    @stepped
    def get_shared_context(self, query: str | None = None, k: int = 5) -> Steps[list[Message]]:
        """The shared insights: all of them, or the ``k`` most relevant to ``query``."""
        insights = self._insights
        if query is None:
            return insights.snapshot()
        return cast(list[Message], (yield Call(insights.relevant, insights.arelevant, query, k)))

    aget_shared_context = stepped_twin(get_shared_context)

    def broadcast_message(self, message: Message) -> None:
        """Add ``message`` to every registered agent's memory and to ``global_memory``.

        All memories are checked first: if one already holds the message, none changes.
        """
        check_message(message)
        with self._lock:
            targets = [*self.agent_memories.values(), self.global_memory]
            for target in targets:
                if message.message_id in target.message_index:
                    raise InputError(
                        "message.message_id",
                        f"{message.message_id!r} was already broadcast",
                        "broadcast a new Message",
                    )
            for target in targets:
                target.add_message(message)


class CoordinatedMemorySystem(_AgentMemories):
    """Facts registered by any agent, added to every agent's context.

    Args:
        memory, user_id: store facts in the long-term memory of ``user_id`` (optional).
        embedder: for ``get_agent_context(..., query=...)``.
    """

    def __init__(
        self, memory: MemoryAPI | None = None, user_id: str | None = None, embedder: Any = None
    ) -> None:
        self.agent_memories: dict[str, ConversationMemory] = {}
        self._facts = _Facts("fact", memory, user_id, embedder)

    @property
    def shared_facts(self) -> ConversationMemory:
        """The registered facts as a conversation of system messages (a fresh copy)."""
        facts = ConversationMemory()
        for message in self._facts.snapshot():
            facts.add_message(message)
        return facts

    def register_fact(self, agent_name: str, fact: str) -> Message:
        """Register ``fact`` discovered by ``agent_name``; returns its message."""
        return self._facts.add(agent_name, fact)

    def get_agent_context(
        self, agent_name: str, query: str | None = None, k: int = 5
    ) -> list[Message]:
        """Shared facts (all, or the ``k`` most relevant to ``query``), then the agent's
        own messages."""
        check_name(agent_name, "agent_name")
        facts = self._facts.snapshot() if query is None else self._facts.relevant(query, k)
        own = self.agent_memories.get(agent_name)
        return facts + (own.get_messages() if own is not None else [])


__all__ = ["CoordinatedMemorySystem", "SharedLog", "SharedMemoryPool"]
