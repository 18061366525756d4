"""Access counts written off the hot path.

Seed 001's importance counts how often a memory is used. ``Memory.get_context`` searches
without writing (a write transaction per prompt cost 2 ms at p50 and 5 ms at p95 on
SQLite) and hands the ids of the memories it actually put in the context to an
:class:`AccessLog`, whose :class:`~tiermem.runner.Runner` writes them ``interval``
seconds after the first waiting one, one transaction for all users. Access counts are
statistics, not data: a crash forgets at most the last interval's counts, and a store
that refuses them keeps them for the next round (up to ``max_pending`` distinct
memories, then the oldest are dropped with a warning).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tiermem.runner import Runner
from tiermem.stores.ops import AccessOp
from tiermem.types.checks import check_uuids

if TYPE_CHECKING:
    from tiermem.stores.protocol import MemoryStore

log = logging.getLogger(__name__)


class AccessLog:
    """Collects memory accesses and writes them to ``store`` from a background thread.

    Args:
        store: where the counts go (``AccessOp`` batches).
        interval: seconds between writes while accesses are waiting.
        max_pending: distinct (user, memory) pairs kept while the store refuses writes.
    """

    def __init__(
        self, store: MemoryStore, *, interval: float = 1.0, max_pending: int = 100_000
    ) -> None:
        self.store = store
        self.interval = interval
        self.max_pending = max_pending
        self.failures = 0
        """Writes the store refused since start (their counts were kept for a retry)."""
        self._pending: OrderedDict[tuple[str, uuid.UUID], int] = OrderedDict()
        self._cond = threading.Condition()
        self._writing = threading.Lock()  # one write at a time; flush() waits for it
        self._closed = False
        self._runner = Runner(
            self._round, name="tiermem-access", clock=store.clock, gather=interval
        )

    @property
    def pending(self) -> int:
        """Distinct (user, memory) accesses not yet written."""
        with self._cond:
            return len(self._pending)

    def record(self, user_id: str, memory_ids: Iterable[uuid.UUID | str]) -> None:
        """Count one access of each memory; returns at once.

        Raises:
            InputError: an id is not a UUID (nothing of the call is recorded).
        """
        ids = check_uuids(memory_ids)
        with self._cond:
            if self._closed:
                return
            first = not self._pending
            for memory_id in ids:
                key = (user_id, memory_id)
                self._pending[key] = self._pending.get(key, 0) + 1
            self._trim()
            first = first and bool(self._pending)
        # the first waiting access wakes the runner, which gathers the interval's; waking
        # it for every later one would switch threads on every prompt for nothing
        if first:
            self._runner.wake()

    def discard_user(self, user_id: str) -> None:
        """Forget the waiting accesses of ``user_id`` (the user is being erased); a write
        in progress finishes first, so none of theirs comes back after."""
        with self._writing, self._cond:
            for key in [k for k in self._pending if k[0] == user_id]:
                del self._pending[key]

    def flush(self) -> bool:
        """Write every waiting access now (after a write in progress); False if the store
        refused them (they are kept for the next round)."""
        with self._writing:
            with self._cond:
                batch, self._pending = self._pending, OrderedDict()
            if not batch:
                return True
            try:
                self.store.batch(_ops(batch))
            except Exception as exc:  # counts are kept for the next round
                self.failures += 1
                log.warning("writing %d access counts failed (%s); will retry", len(batch), exc)
                with self._cond:
                    for key, times in batch.items():
                        self._pending[key] = self._pending.get(key, 0) + times
                        self._pending.move_to_end(key, last=False)
                    self._trim()
                return False
            return True

    def close(self) -> None:
        """Write what is waiting and stop the thread."""
        with self._cond:
            self._closed = True
        self._runner.close(None)
        self.flush()

    def _round(self) -> bool:
        if not self.flush():
            self._runner.wake()  # refused: the counts kept are tried again in an interval
        return False

    def _trim(self) -> None:
        dropped = 0
        while len(self._pending) > self.max_pending:
            self._pending.popitem(last=False)
            dropped += 1
        if dropped:
            log.warning("dropped %d access counts the store did not take", dropped)


def _ops(batch: dict[tuple[str, uuid.UUID], int]) -> list[AccessOp]:
    """One op per (user, times) with the ids accessed that many times."""
    groups: dict[tuple[str, int], list[uuid.UUID]] = {}
    for (user_id, memory_id), times in batch.items():
        groups.setdefault((user_id, times), []).append(memory_id)
    return [AccessOp(user, tuple(ids), times) for (user, times), ids in groups.items()]


__all__ = ["AccessLog"]
