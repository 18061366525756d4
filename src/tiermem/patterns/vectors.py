"""Semantic search over the messages of a pattern (RAG, episodic, hierarchical, shared).

:class:`MessageVectors` keeps one L2-normalized vector per message id and answers
top-k cosine queries. It works with a tiermem :class:`~tiermem.embeddings.Embedder`
(``embed(list) -> array``, batched and cached) and with the seed's embedding model
shape, an object whose ``embed(text)`` returns (or is awaited to return) one vector.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from tiermem.aio.twins import Call, Calls, Steps, either, stepped, stepped_twin
from tiermem.embeddings.base import Embedder
from tiermem.errors import DimensionMismatchError, InputError, InvalidTypeError
from tiermem.messages import Message


def default_embedder() -> Embedder:
    """The local MiniLM embedder (loaded on its first embed)."""
    from tiermem.embeddings import get_embedder

    return get_embedder()


def check_text(value: Any, field: str, hint: str) -> str:
    """A non-empty string; ``hint`` says what to pass when it is empty."""
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"expected str, got {type(value).__name__}")
    if not value.strip():
        raise InputError(field, "is empty", hint)
    return value


def check_query(query: Any) -> str:
    """A non-empty query string."""
    return check_text(query, "query", "pass the text to search for")


def check_k(k: Any) -> int:
    """A number of results: an int >= 0."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InputError("k", f"must be an int >= 0, got {k!r}")
    return k


def _unit(vector: Any, field: str) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(array))
    if array.size == 0 or not np.isfinite(norm) or norm == 0.0:
        raise InputError(field, "the embedding model returned an empty, zero or NaN vector")
    normalized: np.ndarray = array / norm
    return normalized


def embedding(model: Any, texts: list[str]) -> Steps[list[np.ndarray]]:
    r"""The unit vectors of ``texts`` (a stepped body: its waits are :class:`Call`\ s): one
    batch of a tiermem embedder, or each text's ``embed(text)`` of another model (an
    async one only in an async method)."""
    if not texts:
        return []
    if isinstance(model, Embedder):
        rows = yield Call(model.embed, model.aembed, texts)
        return [_unit(row, "embedding") for row in rows]
    out = []
    for text in texts:
        out.append(_unit((yield either(model.embed, text, refused=_async_embed)), "embedding"))
    return out


def _async_embed() -> InvalidTypeError:
    """What a sync method raises for a model whose ``embed`` is a coroutine function."""
    return InvalidTypeError(
        "embedding_model",
        "its embed() is async",
        "use the async method (add_with_embedding / retrieve_relevant / a...)",
    )


def check_embedding_model(model: Any) -> Any:
    """``model`` if it can embed (an Embedder or anything with ``embed``)."""
    if not callable(getattr(model, "embed", None)):
        raise InvalidTypeError(
            "embedding_model",
            f"{type(model).__name__} has no embed()",
            "pass a tiermem embedder (tiermem.embeddings.get_embedder()) or an object "
            "with embed(text)",
        )
    return model


class MessageVectors(Calls):
    """Vectors of messages by ``message_id``; thread-safe.

    Args:
        embedding_model: a tiermem embedder or an object with ``embed(text)``.
    """

    def __init__(self, embedding_model: Any) -> None:
        self.embedding_model = check_embedding_model(embedding_model)
        self._ids: list[str] = []
        self._rows: list[np.ndarray] = []
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, message_id: object) -> bool:
        with self._lock:
            return message_id in self._known

    @property
    def vectors(self) -> list[np.ndarray]:
        """The vectors, in insertion order (a copy of the list)."""
        with self._lock:
            return list(self._rows)

    def put(self, message_id: str, vector: np.ndarray) -> None:
        """Record ``vector`` for ``message_id``; all vectors must share one dimension."""
        with self._lock:
            if self._rows and vector.shape != self._rows[0].shape:
                raise DimensionMismatchError(
                    "embedding",
                    f"has {vector.size} dimensions, earlier messages have {self._rows[0].size}",
                    "use one embedding model for a memory",
                )
            if message_id not in self._known:
                self._known.add(message_id)
                self._ids.append(message_id)
                self._rows.append(vector)

    def _missing(self, messages: Iterable[Message]) -> list[Message]:
        with self._lock:
            known = set(self._known)
        return [m for m in messages if m.message_id not in known and m.text.strip()]

    @stepped
    def ensure(self, messages: Iterable[Message]) -> Steps[None]:
        """Embed (in one batch) the messages that have text and no vector yet."""
        missing = self._missing(messages)
        vectors = yield from embedding(self.embedding_model, [m.text for m in missing])
        for message, vector in zip(missing, vectors, strict=True):
            self.put(message.message_id, vector)

    aensure = stepped_twin(ensure)

    @stepped
    def query_vector(self, query: str) -> Steps[np.ndarray]:
        """The vector of a query text."""
        return (yield from embedding(self.embedding_model, [check_query(query)]))[0]

    aquery_vector = stepped_twin(query_vector)

    def search(
        self, vector: np.ndarray, k: int, among: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` ids most similar to ``vector`` (restricted to ``among``), best first."""
        check_k(k)
        with self._lock:
            allowed = None if among is None else set(among)
            pairs = [
                (i, row)
                for i, row in zip(self._ids, self._rows, strict=True)
                if allowed is None or i in allowed
            ]
        if not pairs or k == 0:
            return []
        matrix = np.stack([row for _, row in pairs])
        if matrix.shape[1] != vector.size:
            raise DimensionMismatchError(
                "query", f"has {vector.size} dimensions, the messages {matrix.shape[1]}"
            )
        scores = matrix @ vector
        best = np.argsort(-scores, kind="stable")[:k]
        return [(pairs[i][0], float(scores[i])) for i in best]


__all__ = [
    "MessageVectors",
    "check_k",
    "check_query",
    "default_embedder",
    "embedding",
]
