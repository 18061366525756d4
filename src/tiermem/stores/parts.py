"""What every part of a store shares: the store's two core methods, which run its ops.

A store holds three parts (:class:`~tiermem.stores.index.MemoryIndex`,
:class:`~tiermem.stores.transcript_api.Transcript`,
:class:`~tiermem.stores.queue.WorkQueue`), each a small protocol of typed methods
derived, as LangGraph's ``BaseStore`` derives ``get``/``put``/``search`` from ``batch``,
from the store's :meth:`Batches.batch` and :meth:`Batches.abatch`: a part checks its
arguments into one op and the store runs it. A part knows no engine, so a backend is
done when its ``batch`` runs every part's ops.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class Batches(Protocol):
    """What a part runs its ops with: the store's transaction of any parts' ops."""

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        """Run ``ops`` in one transaction; one result per op, in order."""
        ...

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        """Async twin of :meth:`batch`."""
        ...


class Part:
    """A part of a store: each of its :func:`~tiermem.aio.twins.stepped` methods runs
    its op in a transaction of its own, by the store's ``batch`` (the ``a``-twin by
    ``abatch``, natively async where the store reads so)."""

    def __init__(self, store: Batches) -> None:
        self._store = store

    def _step(self, op: Any, /) -> Any:
        """Run one op (:func:`~tiermem.aio.twins.stepped`'s wait) in a transaction of its own."""
        return self._store.batch([op])[0]

    async def _astep(self, op: Any, /) -> Any:
        return (await self._store.abatch([op]))[0]
