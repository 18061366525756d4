"""The MemoryStore protocol: a store is the parts it holds and one transaction over them.

A backend implements two methods, :meth:`MemoryStore.batch` and :meth:`MemoryStore.abatch`,
which run a list of small operation tuples of any of its parts (:class:`~.ops.AddOp`,
:class:`~.transcript.AppendOp`, :class:`~.queue.ClaimOp`, ...) in one transaction and
return one result per operation. The parts derive their typed methods from them:

* :attr:`MemoryStore.index` (:class:`~.index.MemoryIndex`): memories and passages, searched
  by meaning and by words;
* :attr:`MemoryStore.transcript` (:class:`~.transcript_api.Transcript`): every message
  whole, sessions, summaries;
* :attr:`MemoryStore.queue` (:class:`~.queue.WorkQueue`): claimed background work (rows to
  index, summaries, facts).

A caller that needs reads of several parts at once (a context's) batches their ops in one
round trip.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from tiermem.clock import SYSTEM_CLOCK, Clock
from tiermem.errors import DimensionMismatchError, InputError, InvalidSizeError
from tiermem.stores.index import MemoryIndex
from tiermem.stores.ops import Op
from tiermem.stores.queue import WorkQueue
from tiermem.stores.records import ReplicaStatus
from tiermem.stores.transcript_api import Transcript

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder

_T = TypeVar("_T")


class MemoryStore(ABC):
    """Long-term memory of many users: the parts below, one transaction over their ops.

    Subclasses implement :meth:`batch`, :meth:`abatch` and :meth:`close`; every typed
    method is a part's.

    Args:
        dimension: width of the stored vectors; defaults to ``embedder.dimension``.
        embedder: optional; embeds content or queries given without a vector.
    """

    clock: Clock = SYSTEM_CLOCK
    """Where the "now" of leases and retry times comes from: wall-clock seconds, compared
    by every process sharing the store. A test sets a
    :class:`~tiermem.clock.ManualClock` (on the store, before its workers are built: they
    take the store's clock) and expires a lease by advancing it."""

    def __init__(self, dimension: int | None = None, embedder: Embedder | None = None) -> None:
        if dimension is None:
            if embedder is None:
                raise InputError("dimension", "is required", "pass dimension= or embedder=")
            dimension = embedder.dimension
        if (
            isinstance(dimension, bool)
            or not isinstance(dimension, int)
            or not 1 <= dimension <= 16_000
        ):
            raise InvalidSizeError("dimension", f"{dimension!r} is not in [1, 16000]")
        if embedder is not None and embedder.dimension != dimension:
            raise DimensionMismatchError(
                "embedder",
                f"{embedder.model_id} makes {embedder.dimension}-dimensional vectors, "
                f"the store holds {dimension}",
                "use a store of the embedder's dimension",
            )
        self.dimension = dimension
        self.embedder = embedder
        self.table = f"memories_{dimension}"
        self.index = MemoryIndex(self, dimension, embedder)
        """Memories and passages, searched by meaning and by words."""
        self.transcript = Transcript(self)
        """Every message whole, in order; sessions and their summaries."""
        self.queue = WorkQueue(self)
        """Background work claimed with a lease: rows to index, summaries, facts."""

    @abstractmethod
    def batch(self, ops: Iterable[Op]) -> list[Any]:
        """Run ``ops`` (of any part) in one transaction; one result per op, in order.

        If any op fails, nothing of the batch is kept and the error is raised.
        """

    @abstractmethod
    async def abatch(self, ops: Iterable[Op]) -> list[Any]:
        """Async twin of :meth:`batch`."""

    async def abatch_then(self, ops: Iterable[Op], then: Callable[[list[Any]], _T]) -> _T:
        """``then(results)`` of :meth:`batch`, ``then`` (work on the results) called in a
        thread; a store that reads natively reads and shapes the rows in that thread too."""
        ops = list(ops)
        return await asyncio.to_thread(lambda: then(self.batch(ops)))

    @abstractmethod
    def close(self) -> None:
        """Release connections and caches; the store is unusable afterwards."""

    def replica_status(self) -> ReplicaStatus | None:
        """The read replica's state and lag; None for a store without one."""
        return None

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
