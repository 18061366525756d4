"""WorkingMemory: an in-process vector index of recent items (seed 001's working tier).

Items (tool outputs, user facts) are embedded, kept in FAISS inner-product indexes
(``IndexIDMap`` over ``IndexFlatIP``, so search is exact cosine similarity on the
normalized vectors) with their metadata, and dropped oldest-first when the memory
exceeds ``max_memory_mb``: on every add and on a background interval.

Vectors are partitioned by ``user_id`` (one index per user): a search for a user only
ever scans that user's vectors, so it costs O(that user's items) and cannot return
another user's item. A search without ``user_id`` (allowed unless ``user_isolation``)
merges every partition.

Every mutation validates and embeds *before* taking the lock, then writes the index
and the metadata together: an embedder that raises or times out changes nothing.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import logging
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from tiermem.aio.twins import Steps, stepped, stepped_twin, twin
from tiermem.clock import Clock
from tiermem.embeddings.base import Embedder, normalize_rows
from tiermem.errors import (
    ConfigError,
    DimensionMismatchError,
    InputError,
    InvalidTypeError,
    MissingUserError,
    NotFoundError,
    ProviderError,
    ProviderTimeoutError,
    TiermemError,
)
from tiermem.runner import Backoff, Runner
from tiermem.working.items import (
    PendingItem,
    Record,
    WorkingItem,
    WorkingStats,
    check_content,
    check_id,
    check_metadata,
    check_positive,
    check_search,
    copy_item,
    pending_item,
    resolve_field,
)

log = logging.getLogger(__name__)


@contextmanager
def _omp_threads(count: int | None) -> Iterator[None]:
    """Run faiss with ``count`` OpenMP threads in this thread (an OpenMP per-thread setting)."""
    if count is None:
        yield
        return
    import faiss

    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(count)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


def _new_index(dimension: int) -> Any:
    import faiss

    return faiss.IndexIDMap(faiss.IndexFlatIP(dimension))


@dataclass
class _Partition:
    """The vectors of one user (``None``: items added without a user)."""

    index: Any
    ids: set[int] = field(default_factory=set)


class WorkingMemory:
    """Recent items searchable by meaning, bounded in size, isolated per user.

    Args:
        dimension: vector width; defaults to the embedder's.
        max_memory_mb: oldest items are dropped beyond this size (vectors, text, metadata).
        fifo_interval_min: minutes between background cleanups; 0 or None: no thread.
        embedder: turns text into vectors; defaults to ``get_embedder()`` (local MiniLM).
        user_isolation: every call must name a ``user_id`` (the Memory facade's mode).
        embed_timeout: seconds an embed may take before :class:`ProviderTimeoutError`.
        recency_half_life_s: age at which recency counts half, for ``recency_bias``.
        faiss_threads: OpenMP threads per search (set for the calling thread only, then
            restored). 1 by default: one query is too small to split, and OpenMP's
            spinning threads made a 1k-item search 200x slower on a busy 2-core machine
            (benchmarks/working.py). None keeps faiss's own setting.
        clock: where the cleanup's interval takes its time (a test's manual clock).
    """

    def __init__(
        self,
        dimension: int | None = None,
        max_memory_mb: float = 10,
        fifo_interval_min: float | None = 5,
        embedder: Embedder | None = None,
        *,
        user_isolation: bool = False,
        embed_timeout: float | None = None,
        recency_half_life_s: float = 3600.0,
        faiss_threads: int | None = 1,
        clock: Clock | None = None,
    ) -> None:
        check_positive("max_memory_mb", max_memory_mb)
        if faiss_threads is not None:
            check_positive("faiss_threads", faiss_threads, integer=True)
        check_positive("recency_half_life_s", recency_half_life_s)
        if embed_timeout is not None:
            check_positive("embed_timeout", embed_timeout)
        if fifo_interval_min:
            check_positive("fifo_interval_min", fifo_interval_min)
        self.embedder = embedder
        self.dimension = self._resolve_dimension(dimension)
        self.max_memory_mb = float(max_memory_mb)
        self.fifo_interval_min = fifo_interval_min
        self.user_isolation = user_isolation
        self.embed_timeout = embed_timeout
        self.recency_half_life_s = float(recency_half_life_s)
        self.faiss_threads = faiss_threads
        self._lock = threading.RLock()
        self._records: OrderedDict[int, Record] = OrderedDict()  # insertion order = age
        self._partitions: dict[str | None, _Partition] = {}
        self._ids = itertools.count(1)
        self._bytes = 0
        self._evicted = 0
        self._cleanups = 0
        self._executor: ThreadPoolExecutor | None = None
        self._cleaner: Runner | None = None
        if fifo_interval_min:
            self._start_timer(float(fifo_interval_min) * 60.0, clock)

    # ----------------------------------------------------------------- construction

    def _resolve_dimension(self, dimension: int | None) -> int:
        if dimension is not None:
            check_positive("dimension", dimension, integer=True)
        if self.embedder is None:
            from tiermem.embeddings import get_embedder

            default = get_embedder()
            if dimension is None or dimension == default.dimension:
                self.embedder = default
            return dimension if dimension is not None else default.dimension
        if dimension is not None and dimension != self.embedder.dimension:
            raise DimensionMismatchError(
                "dimension",
                f"{dimension} differs from the embedder's {self.embedder.dimension} "
                f"({self.embedder.model_id})",
                "omit dimension to use the embedder's",
            )
        return int(self.embedder.dimension)

    def _start_timer(self, interval_s: float, clock: Clock | None) -> None:
        """Clean up every ``interval_s`` seconds; the runner holds no reference to the
        memory, and stops when the memory is collected."""
        self._cleaner = Runner(
            functools.partial(_cleanup, weakref.ref(self)),
            name="tiermem-working-fifo",
            clock=clock,
            idle=interval_s,
            backoff=Backoff(interval_s, interval_s),
        )
        self._cleaner.start()
        weakref.finalize(self, self._cleaner.close, 0.0)

    # ------------------------------------------------------------------------- add

    @stepped
    def add(
        self,
        content: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        source: str | None = None,
        timestamp: float | datetime | None = None,
    ) -> Steps[int]:
        """Embed ``content`` and store it; return its id. Drops oldest items if over size."""
        pending = [self._pending(content, metadata, user_id, session_id, source, timestamp)]
        return self._insert(pending, (yield [content]))[0]

    aadd = stepped_twin(add)

    @stepped
    def add_many(
        self,
        contents: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        source: str | None = None,
    ) -> Steps[list[int]]:
        """Embed ``contents`` in one batch and store them all (or none); return their ids."""
        pending = self._pending_many(contents, metadatas, user_id, session_id, source)
        return self._insert(pending, (yield [p.content for p in pending]))

    aadd_many = stepped_twin(add_many)

    def add_with_embedding(
        self,
        content: str,
        embedding: Sequence[float] | np.ndarray,
        metadata: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        source: str | None = None,
        timestamp: float | datetime | None = None,
    ) -> int:
        """Store ``content`` with a vector computed elsewhere (it is L2-normalized here)."""
        pending = [self._pending(content, metadata, user_id, session_id, source, timestamp)]
        return self._insert(pending, self._query_vector(embedding, "embedding"))[0]

    aadd_with_embedding = stepped_twin(add_with_embedding)

    # ---------------------------------------------------------------------- search

    @stepped
    def search(
        self,
        query: str | Sequence[float] | np.ndarray,
        k: int = 5,
        *,
        user_id: str | None = None,
        filter_metadata: Mapping[str, Any] | None = None,
        recency_bias: float = 0.0,
    ) -> Steps[list[WorkingItem]]:
        """Return the ``k`` items most similar to ``query`` (text or vector), best first.

        Args:
            query: text to embed, or a vector of ``dimension`` floats.
            k: number of results.
            user_id: search only this user's items (required with ``user_isolation``).
            filter_metadata: keep only items whose metadata has these exact values.
            recency_bias: 0..1; ranks by ``(1 - b) * similarity + b * recency``, where
                recency halves every ``recency_half_life_s``. The ranking stays exact.
        """
        check_search(k, filter_metadata, recency_bias)
        self._scope(user_id)
        vector = self._query_vector(query, "query") if not isinstance(query, str) else None
        if vector is None:
            vector = yield [check_content(query, "query")]
        return self._search(vector, k, user_id, filter_metadata, recency_bias)

    asearch = stepped_twin(search)

    def get(self, item_id: int, *, user_id: str | None = None) -> WorkingItem:
        """Return one item; :class:`NotFoundError` if absent or another user's."""
        with self._lock:
            return copy_item(self._owned(item_id, self._scope(user_id)).item)

    # ------------------------------------------------------------- remove / clear

    def remove(self, item_id: int, *, user_id: str | None = None) -> None:
        """Delete one item; :class:`NotFoundError` if absent or another user's."""
        user = self._scope(user_id)
        with self._lock:
            self._owned(item_id, user)
            self._delete([item_id])

    aremove = stepped_twin(remove)

    def clear(self, user_id: str | None = None, *, all_users: bool = False) -> int:
        """Delete one user's items, or with ``all_users=True`` everything; return the count."""
        if all_users and user_id is not None:
            raise InputError("all_users", "given together with user_id", "pass one of them")
        scope = None if all_users else self._scope(user_id)
        with self._lock:
            if scope is None:
                count = len(self._records)
                self._records.clear()
                self._partitions.clear()
                self._bytes = 0
                return count
            partition = self._partitions.get(scope)
            ids = list(partition.ids) if partition else []
            self._delete(ids)
            return len(ids)

    aclear = stepped_twin(clear)

    def cleanup(self) -> int:
        """Drop oldest items until the memory fits ``max_memory_mb``; return how many."""
        with self._lock:
            self._cleanups += 1
            limit = self.max_memory_mb * 1024 * 1024
            victims: list[int] = []
            freed = 0
            for item_id, record in self._records.items():
                if self._bytes - freed <= limit:
                    break
                victims.append(item_id)
                freed += record.nbytes
            self._delete(victims)
            self._evicted += len(victims)
            return len(victims)

    acleanup = stepped_twin(cleanup)

    # ---------------------------------------------------------------------- stats

    @property
    def size_mb(self) -> float:
        """Accounted size of every item, in MiB (what ``max_memory_mb`` bounds)."""
        return self._bytes / (1024 * 1024)

    def __len__(self) -> int:
        return len(self._records)

    def stats(self, user_id: str | None = None) -> WorkingStats:
        """Counts and sizes; for one user's items when ``user_id`` is given."""
        with self._lock:
            if user_id is None:
                items, nbytes = len(self._records), self._bytes
            else:
                partition = self._partitions.get(check_id(user_id, "user_id"))
                ids = partition.ids if partition else set()
                items, nbytes = len(ids), sum(self._records[i].nbytes for i in ids)
            return WorkingStats(
                items=items,
                users=sum(1 for user in self._partitions if user is not None),
                size_mb=nbytes / (1024 * 1024),
                max_memory_mb=self.max_memory_mb,
                dimension=self.dimension,
                evicted=self._evicted,
                cleanups=self._cleanups,
                model_id=self.embedder.model_id if self.embedder is not None else None,
            )

    astats = stepped_twin(stats)

    # ---------------------------------------------------------------------- close

    def close(self) -> None:
        """Stop the cleanup thread and the embed worker; idempotent. Data stays readable."""
        cleaner, self._cleaner = self._cleaner, None
        if cleaner is not None:
            cleaner.close(None)
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    aclose = twin(close)

    def __enter__(self) -> WorkingMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------- internals

    def _scope(self, user_id: str | None) -> str | None:
        """Validate ``user_id``; under isolation it is required."""
        if user_id is None:
            if self.user_isolation:
                raise MissingUserError(
                    "user_id", "is required: this working memory isolates users", "pass user_id="
                )
            return None
        return check_id(user_id, "user_id")

    def _owned(self, item_id: int, user: str | None) -> Record:
        if isinstance(item_id, bool) or not isinstance(item_id, (int, np.integer)):
            raise InvalidTypeError("item_id", f"expected an int, got {type(item_id).__name__}")
        record = self._records.get(int(item_id))
        if record is None or (user is not None and record.item.user_id != user):
            raise NotFoundError(f"item_id: no working memory item {item_id} for this user")
        return record

    def _pending(
        self,
        content: object,
        metadata: Mapping[str, Any] | None,
        user_id: str | None,
        session_id: str | None,
        source: str | None,
        timestamp: float | datetime | None,
    ) -> PendingItem:
        """Validate one item and resolve its fields from arguments and metadata."""
        text = check_content(content, "content")
        meta = check_metadata(metadata)
        user = self._scope(resolve_field(meta, "user_id", user_id))
        limit = self.max_memory_mb
        return pending_item(text, meta, user, session_id, source, timestamp, self.dimension, limit)

    def _pending_many(
        self,
        contents: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None,
        user_id: str | None,
        session_id: str | None,
        source: str | None,
    ) -> list[PendingItem]:
        if isinstance(contents, str) or not isinstance(contents, Sequence):
            raise InvalidTypeError("contents", "expected a list of str", "pass [content, ...]")
        metas = list(metadatas) if metadatas is not None else [None] * len(contents)
        if len(metas) != len(contents):
            raise InputError("metadatas", f"has {len(metas)} entries for {len(contents)} contents")
        return [
            self._pending(text, meta, user_id, session_id, source, None)
            for text, meta in zip(contents, metas, strict=True)
        ]

    def _require_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ConfigError(
                "embedder",
                f"no embedder of dimension {self.dimension} configured; text needs one",
                "pass embedder=get_embedder(...), or use add_with_embedding/vector queries",
            )
        return self.embedder

    def _step(self, texts: list[str], /) -> np.ndarray:
        """The vectors of ``texts`` (what a :func:`stepped` method waits for)."""
        embedder = self._require_embedder()
        if self.embed_timeout is None:
            return self._checked(lambda: embedder.embed(texts), len(texts))
        if self._executor is None:
            self._executor = ThreadPoolExecutor(2, thread_name_prefix="tiermem-working-embed")
        future = self._executor.submit(embedder.embed, texts)
        try:
            return self._checked(lambda: future.result(self.embed_timeout), len(texts))
        finally:
            future.cancel()

    async def _astep(self, texts: list[str], /) -> np.ndarray:
        embedder = self._require_embedder()
        try:
            raw = await asyncio.wait_for(embedder.aembed(texts), self.embed_timeout)
        except Exception as exc:
            raise self._provider_error(exc) from exc
        return normalize_rows(raw, self.dimension, len(texts))

    def _checked(self, call: Callable[[], np.ndarray], rows: int) -> np.ndarray:
        """Run an embed call; turn its failures into typed errors and check its output."""
        try:
            raw = call()
        except Exception as exc:
            raise self._provider_error(exc) from exc
        return normalize_rows(raw, self.dimension, rows)

    def _provider_error(self, exc: Exception) -> TiermemError:
        model = self.embedder.model_id if self.embedder is not None else "embedder"
        if isinstance(exc, TiermemError):
            return exc
        if isinstance(exc, (TimeoutError, FutureTimeout, asyncio.TimeoutError)):
            return ProviderTimeoutError(
                f"{model} did not embed within embed_timeout={self.embed_timeout}s; "
                "nothing was stored"
            )
        return ProviderError(f"{model} failed: {type(exc).__name__}: {exc}; nothing was stored")

    def _query_vector(self, value: object, name: str) -> np.ndarray:
        """Validate a caller's vector (list or array) and return it as a normalized (1, d) row."""
        try:
            array = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidTypeError(name, f"expected a vector of floats ({exc})") from exc
        if array.ndim == 2 and array.shape[0] == 1:
            array = array[0]
        if array.ndim != 1 or array.shape[0] != self.dimension:
            raise DimensionMismatchError(
                name,
                f"has shape {array.shape}, expected ({self.dimension},)",
                f"pass a vector of {self.dimension} floats from the same embedding model",
            )
        if not np.isfinite(array).all():
            raise InputError(name, "contains NaN or infinite values", "pass finite floats")
        norm = float(np.linalg.norm(array))
        if norm == 0.0:
            raise InputError(name, "is the zero vector, which has no direction")
        return (array / norm).reshape(1, -1).astype(np.float32)

    def _insert(self, pending: list[PendingItem], vectors: np.ndarray) -> list[int]:
        """Write items and vectors together, then enforce the size limit."""
        with self._lock:
            ids = [next(self._ids) for _ in pending]
            self._add_vectors(ids, [p.user_id for p in pending], vectors)
            for item_id, p in zip(ids, pending, strict=True):
                item = WorkingItem(
                    id=item_id,
                    content=p.content,
                    metadata=p.metadata,
                    timestamp=p.timestamp,
                    user_id=p.user_id,
                    session_id=p.session_id,
                    source=p.source,
                )
                self._records[item_id] = Record(item, p.nbytes)
                self._partitions[p.user_id].ids.add(item_id)
                self._bytes += p.nbytes
            if self._bytes > self.max_memory_mb * 1024 * 1024:
                self.cleanup()
            return ids

    def _add_vectors(self, ids: list[int], users: list[str | None], vectors: np.ndarray) -> None:
        """Add each row to its user's partition; on failure undo every add (lock held)."""
        rows_by_user: dict[str | None, list[int]] = {}
        for row, user in enumerate(users):
            rows_by_user.setdefault(user, []).append(row)
        written: list[tuple[_Partition, np.ndarray]] = []
        try:
            for user, rows in rows_by_user.items():
                partition = self._partitions.get(user)
                if partition is None:
                    partition = self._partitions[user] = _Partition(_new_index(self.dimension))
                batch = np.asarray([ids[row] for row in rows], dtype=np.int64)
                partition.index.add_with_ids(vectors[rows], batch)
                written.append((partition, batch))
        except Exception:
            for partition, batch in written:
                partition.index.remove_ids(batch)
            for user in rows_by_user:
                if user in self._partitions and not self._partitions[user].ids:
                    del self._partitions[user]
            raise

    def _delete(self, ids: Iterable[int]) -> None:
        """Remove items from their partitions and the metadata (lock held)."""
        by_user: dict[str | None, list[int]] = {}
        for item_id in ids:
            record = self._records.pop(item_id)
            self._bytes -= record.nbytes
            by_user.setdefault(record.item.user_id, []).append(item_id)
        for user, victims in by_user.items():
            partition = self._partitions[user]
            partition.index.remove_ids(np.asarray(victims, dtype=np.int64))
            partition.ids.difference_update(victims)
            if not partition.ids:
                del self._partitions[user]

    def _search(
        self,
        vector: np.ndarray,
        k: int,
        user_id: str | None,
        filter_metadata: Mapping[str, Any] | None,
        bias: float,
    ) -> list[WorkingItem]:
        """Exact top-k: widen the candidate set until no unseen item could rank higher."""
        wanted = dict(filter_metadata or {})
        now = time.time()
        with self._lock, _omp_threads(self.faiss_threads):
            if user_id is None:
                partitions = list(self._partitions.values())
            else:
                partitions = [p for p in [self._partitions.get(user_id)] if p is not None]
            total = max((p.index.ntotal for p in partitions), default=0)
            depth = k if not wanted and bias == 0 else max(4 * k, 64)
            while True:
                depth = min(depth, total)
                scored, bound = self._candidates(vector, partitions, depth, wanted, bias, now)
                best = heapq.nlargest(k, scored, key=lambda pair: pair[0])
                complete = len(best) == k and best[-1][0] >= (1 - bias) * bound + bias
                if depth >= total or complete:
                    return [item for _, item in best]
                depth *= 4

    def _candidates(
        self,
        vector: np.ndarray,
        partitions: list[_Partition],
        depth: int,
        wanted: dict[str, Any],
        bias: float,
        now: float,
    ) -> tuple[list[tuple[float, WorkingItem]], float]:
        """Top ``depth`` of each partition, filtered and scored; and the best unseen similarity."""
        scored: list[tuple[float, WorkingItem]] = []
        bound = -math.inf
        for partition in partitions:
            n = min(depth, partition.index.ntotal)
            sims, ids = partition.index.search(vector, n)
            if n < partition.index.ntotal:
                bound = max(bound, float(sims[0][-1]))
            for sim, item_id in zip(sims[0].tolist(), ids[0].tolist(), strict=True):
                item = self._records[item_id].item
                if any(item.metadata.get(key, _MISSING) != v for key, v in wanted.items()):
                    continue
                recency = 0.5 ** (max(0.0, now - item.timestamp) / self.recency_half_life_s)
                score = (1 - bias) * sim + bias * recency
                scored.append((score, copy_item(item, score, sim)))
        return scored, bound


_MISSING = object()


def _cleanup(ref: weakref.ref[WorkingMemory]) -> bool:
    """The cleanup runner's round: clean up the memory if it is still alive (a failed
    cleanup is retried by the runner after its backoff)."""
    memory = ref()
    if memory is not None:
        memory.cleanup()
    return False
