"""HierarchicalMemory (seed 004): core, working and episodic levels by importance.

Every message enters working memory; messages at or above ``importance_threshold`` are
also kept in core memory, which is always part of the context. Working memory holds the
newest ``working_size`` messages; what leaves it (a tool call always with its results)
moves to episodic memory, from which :meth:`HierarchicalMemory.get_context_for_llm`
recalls the messages relevant to a query by semantic search.
"""

from __future__ import annotations

from typing import Any

from tiermem.aio.twins import Call, Calls, Steps, stepped, stepped_twin
from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.messages import Message
from tiermem.patterns.conversation import ConversationMemory, check_message
from tiermem.patterns.vectors import MessageVectors, default_embedder

RECALL_HEADER = "Relevant earlier messages:"


class HierarchicalMemory(Calls):
    """Three :class:`ConversationMemory` levels (seed 004's attribute names).

    Args:
        importance_threshold: importance at or above which a message is core.
        working_size: messages working memory keeps (the seed moved 25 of 50 at once;
            here each message moves as soon as it leaves the window).
        embedder: for recalling episodic messages by query; default MiniLM (loaded only
            when a query is given).
    """

    def __init__(
        self,
        importance_threshold: float = 0.7,
        working_size: int = 50,
        embedder: Any = None,
    ) -> None:
        _check_importance("importance_threshold", importance_threshold)
        if isinstance(working_size, bool) or not isinstance(working_size, int) or working_size < 1:
            raise InvalidSizeError("working_size", f"must be an int >= 1, got {working_size!r}")
        self.importance_threshold = float(importance_threshold)
        self.core_memory = ConversationMemory()
        self.working_memory = ConversationMemory(max_messages=working_size)
        self.episodic_memory = ConversationMemory()
        self.working_memory.buffer.add_eviction_consumer(self._to_episodic)
        self._embedder = embedder
        self._vectors: MessageVectors | None = None

    def _to_episodic(self, messages: list[Message]) -> None:
        for message in messages:
            self.episodic_memory.add_message(message)

    def add_message_with_importance(self, message: Message, importance: float) -> None:
        """Add ``message`` to working memory, and to core memory if important enough."""
        check_message(message)
        _check_importance("importance", importance)
        if message.message_id in self.working_memory.message_index:
            self.working_memory.add_message(message)  # raises the duplicate error
        if importance >= self.importance_threshold:
            self.core_memory.add_message(message)
        self.working_memory.add_message(message)

    @property
    def vectors(self) -> MessageVectors:
        """The vectors of episodic messages (built on the first query)."""
        if self._vectors is None:
            self._vectors = MessageVectors(self._embedder or default_embedder())
        return self._vectors

    @stepped
    def recall(self, query: str, k: int = 5) -> Steps[list[Message]]:
        """The ``k`` episodic messages most similar to ``query``, in conversation order."""
        episodic, vectors = self.episodic_memory.messages, self.vectors
        yield Call(vectors.ensure, vectors.aensure, episodic)
        vector = yield Call(vectors.query_vector, vectors.aquery_vector, query)
        return self._in_order(episodic, vectors.search(vector, k, among=self._ids(episodic)))

    arecall = stepped_twin(recall)

    @staticmethod
    def _ids(messages: list[Message]) -> list[str]:
        return [m.message_id for m in messages]

    @staticmethod
    def _in_order(messages: list[Message], hits: list[tuple[str, float]]) -> list[Message]:
        wanted = {message_id for message_id, _ in hits}
        return [m for m in messages if m.message_id in wanted]

    @stepped
    def get_context_for_llm(
        self, query: str | None = None, k: int = 5
    ) -> Steps[list[dict[str, Any]]]:
        """Core memory, then (with a query) relevant episodic messages as one system
        message, then working memory without the core messages it repeats."""
        recalled = [] if query is None else (yield Call(self.recall, self.arecall, query, k))
        return self._context(recalled)

    aget_context_for_llm = stepped_twin(get_context_for_llm)

    def _context(self, recalled: list[Message]) -> list[dict[str, Any]]:
        core = self.core_memory.messages
        in_core = {m.message_id for m in core}
        context = [m.to_openai() for m in core]
        if recalled:
            lines = "\n".join(f"{m.role}: {m.text}" for m in recalled)
            context.append({"role": "system", "content": f"{RECALL_HEADER}\n{lines}"})
        context += [
            m.to_openai() for m in self.working_memory.messages if m.message_id not in in_core
        ]
        return context


def _check_importance(field: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(field, f"expected a number, got {type(value).__name__}")
    if not 0 <= value <= 1:
        raise InvalidSizeError(field, f"must be in [0, 1], got {value}")


__all__ = ["HierarchicalMemory"]
