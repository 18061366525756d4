"""RAGMemory (seed 004): a conversation whose messages are retrieved by meaning.

Each added message is embedded; :meth:`RAGMemory.retrieve_relevant` returns the ``k``
messages closest to a query by cosine similarity. The embedding model is a tiermem
embedder (default: local MiniLM) or, as in the seed, any object whose ``embed(text)``
returns (or is awaited to return) a vector.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tiermem.aio.twins import Call, Calls, Steps, stepped, stepped_twin
from tiermem.messages import Message
from tiermem.patterns.conversation import ConversationMemory, check_message
from tiermem.patterns.vectors import MessageVectors, default_embedder


class RAGMemory(Calls):
    """A :class:`ConversationMemory` with a vector per message.

    Args:
        embedding_model: a tiermem embedder or an object with ``embed(text)``;
            default the local MiniLM.
        memory: the conversation to use (default a new, unbounded one).
    """

    def __init__(
        self, embedding_model: Any = None, memory: ConversationMemory | None = None
    ) -> None:
        self.memory = memory if memory is not None else ConversationMemory()
        self.embedding_model = (
            embedding_model if embedding_model is not None else default_embedder()
        )
        self._vectors = MessageVectors(self.embedding_model)
        self._lock = threading.Lock()

    @property
    def embeddings(self) -> list[np.ndarray]:
        """The vectors of the messages, in the order they were added (seed attribute)."""
        return self._vectors.vectors

    @stepped
    def add(self, message: Message) -> Steps[None]:
        """Embed ``message`` and add it; if embedding fails nothing is added (a model whose
        ``embed`` is async needs :meth:`add_with_embedding`)."""
        check_message(message)
        vectors = self._vectors
        vector = None
        if message.text.strip():
            vector = yield Call(vectors.query_vector, vectors.aquery_vector, message.text)
        self._add(message, vector)

    add_with_embedding = stepped_twin(add)

    def _add(self, message: Message, vector: np.ndarray | None) -> None:
        with self._lock:
            self.memory.add_message(message)
            if vector is not None:
                self._vectors.put(message.message_id, vector)

    @stepped
    def retrieve(self, query: str, k: int = 5) -> Steps[list[Message]]:
        """The ``k`` messages most similar to ``query``, best first."""
        vectors = self._vectors
        return self._top((yield Call(vectors.query_vector, vectors.aquery_vector, query)), k)

    retrieve_relevant = stepped_twin(retrieve)

    def _top(self, vector: np.ndarray, k: int) -> list[Message]:
        index = self.memory.message_index
        hits = self._vectors.search(vector, k, among=list(index))
        return [index[message_id] for message_id, _ in hits]

    def __len__(self) -> int:
        return len(self.memory)


__all__ = ["RAGMemory"]
