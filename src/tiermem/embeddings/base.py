"""The Embedder protocol and the base class that gives every provider the same behaviour.

A provider implements one method, :meth:`BaseEmbedder._embed_batch` (and optionally
:meth:`BaseEmbedder._aembed_batch` when it has native async I/O). The base class
validates input, deduplicates identical texts, serves repeats from an LRU cache keyed
by (model, dimension, content hash), splits the rest into batches, and checks and
L2-normalizes what the provider returns.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.embeddings.cache import LRUCache, content_hash
from tiermem.errors import (
    ContentTooLargeError,
    DimensionMismatchError,
    InputError,
    InvalidSizeError,
    InvalidTypeError,
    ProviderResponseError,
)

DEFAULT_MAX_CHARS = 200_000


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into an ``(n, dimension)`` float32 array of L2-normalized rows.

    ``model_id`` names the model (``"local/all-MiniLM-L6-v2"``) so stores can tell
    vectors of different models apart; ``dimension`` is the width of each row.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    async def aembed(self, texts: Sequence[str]) -> np.ndarray: ...


def validate_texts(texts: object, max_chars: int = DEFAULT_MAX_CHARS) -> list[str]:
    """Return ``texts`` as a list, or raise a typed error naming the bad element."""
    if isinstance(texts, (str, bytes)):
        raise InvalidTypeError(
            "texts", "expected a sequence of str, got a single string", "pass [text]"
        )
    if not isinstance(texts, Sequence):
        raise InvalidTypeError("texts", f"expected a sequence of str, got {type(texts).__name__}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidTypeError(f"texts[{i}]", f"expected str, got {type(text).__name__}")
        if not text.strip():
            raise InputError(f"texts[{i}]", "is empty or whitespace", "embed non-empty text")
        if len(text) > max_chars:
            raise ContentTooLargeError(
                f"texts[{i}]",
                f"has {len(text)} characters, more than max_chars={max_chars}",
                "split the text or raise max_chars",
            )
    return list(texts)


def normalize_rows(vectors: object, dimension: int, expected_rows: int) -> np.ndarray:
    """Check a provider's output (shape, finite, non-zero) and return it L2-normalized."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != expected_rows:
        raise ProviderResponseError(
            f"embedder returned shape {array.shape}, expected ({expected_rows}, {dimension})"
        )
    if array.shape[1] != dimension:
        raise DimensionMismatchError(
            "dimension",
            f"embedder returned {array.shape[1]}-dimensional vectors, expected {dimension}",
            "configure the embedder's dimension to match its model",
        )
    if not np.isfinite(array).all():
        raise ProviderResponseError("embedder returned NaN or infinite values")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ProviderResponseError("embedder returned an all-zero vector that has no direction")
    return np.ascontiguousarray(array / norms, dtype=np.float32)


class BaseEmbedder(ABC):
    """Batching, caching, validation and normalization shared by every provider.

    Args:
        model_id: the model string, e.g. ``"local/all-MiniLM-L6-v2"``.
        batch_size: at most this many texts go to the provider in one call.
        cache_size: LRU entries kept (0 disables the cache); ignored if ``cache`` is given.
        cache: a cache to share between embedders (keys include the model id).
        max_chars: longer texts raise :class:`~tiermem.errors.ContentTooLargeError`.
    """

    def __init__(
        self,
        model_id: str,
        *,
        batch_size: int = 64,
        cache_size: int = 1000,
        cache: LRUCache[np.ndarray] | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        for name, value in (("batch_size", batch_size), ("max_chars", max_chars)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(name, f"expected an int, got {type(value).__name__}")
            if value < 1:
                raise InvalidSizeError(name, f"must be >= 1, got {value}")
        self._model_id = model_id
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.cache: LRUCache[np.ndarray] = cache if cache is not None else LRUCache(cache_size)

    @property
    def model_id(self) -> str:
        """The model string this embedder was built from."""
        return self._model_id

    @property
    @abstractmethod
    def dimension(self) -> int:
        """Width of each vector."""

    @abstractmethod
    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        """Embed at most ``batch_size`` validated texts; rows need not be normalized."""

    async def _aembed_batch(self, texts: list[str]) -> np.ndarray:
        """Async version of :meth:`_embed_batch`; by default runs it in a worker thread."""
        return await asyncio.to_thread(self._embed_batch, texts)

    @stepped
    def embed(self, texts: Sequence[str]) -> Steps[np.ndarray]:
        """Return an ``(len(texts), dimension)`` float32 array of unit-length rows."""
        return (yield from self._vectors(texts))

    aembed = stepped_twin(embed)

    @stepped
    def embed_one(self, text: str) -> Steps[np.ndarray]:
        """Return the ``(dimension,)`` vector of one text."""
        return np.asarray((yield from self._vectors([text]))[0])

    aembed_one = stepped_twin(embed_one)

    def _vectors(self, texts: Sequence[str]) -> Steps[np.ndarray]:
        """The rows of ``texts``: the cached ones from the cache, each batch of the other
        distinct texts a wait (the model's call, :meth:`_step` or :meth:`_astep`)."""
        texts = validate_texts(texts, self.max_chars)
        vectors: dict[str, np.ndarray] = {}
        missing: dict[str, str] = {}  # text -> digest, in first-seen order
        for text in texts:
            if text in vectors or text in missing:
                continue
            digest = content_hash(text)
            cached = self.cache.get(self._cache_key(digest))
            if cached is None:
                missing[text] = digest
            else:
                vectors[text] = cached
        todo = list(missing)
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            rows = normalize_rows((yield batch), self.dimension, len(batch))
            rows.setflags(write=False)
            for text, row in zip(batch, rows, strict=True):
                vectors[text] = row
                self.cache.put(self._cache_key(missing[text]), row)
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return np.stack([vectors[text] for text in texts]).astype(np.float32, copy=False)

    def _step(self, batch: list[str], /) -> np.ndarray:
        return self._embed_batch(batch)

    async def _astep(self, batch: list[str], /) -> np.ndarray:
        return await self._aembed_batch(batch)

    def _cache_key(self, digest: str) -> tuple[str, int, str]:
        return (self._model_id, self.dimension, digest)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._model_id!r})"
