"""What the process around a Memory uses: the state of its write path, the operator's
view of every user, its health, and the end of a run, flush and close."""

from __future__ import annotations

from typing import Any

from tiermem.aio.twins import stepped_twin, twin
from tiermem.errors import StoreUnavailableError
from tiermem.memory.retention import Retention
from tiermem.memory.wiring import Tiers
from tiermem.messages import Message
from tiermem.stores.records import ReplicaStatus
from tiermem.types.checks import check_timeout, check_user_id
from tiermem.types.transcript import TranscriptRow, WorkStats


class Operations:
    """The operations of :class:`~tiermem.memory.Memory` on its parts as a whole."""

    _tiers: Tiers
    _keep: Retention
    unarchived: list[Message]

    def _open(self, user_id: str) -> str:
        """``user_id`` checked, once this Memory is known to be open."""
        self._tiers.check_open()
        return check_user_id(user_id)

    # -- the write path's state ---------------------------------------------------------

    def failed(self, user_id: str, limit: int = 100) -> list[TranscriptRow]:
        """The user's messages that could not be indexed, each with its ``error``: they
        stay in the transcript (and the recent window) and are found by keyword."""
        user_id = self._open(user_id)
        return list(self._tiers.store.transcript.failed(user_id, limit))

    def retry_failed(self, user_id: str) -> int:
        """Queue the user's failed messages again (after fixing the cause); how many."""
        user_id = self._open(user_id)
        count = int(self._tiers.store.queue.retry_failed(user_id))
        if count:
            self._tiers.worker.wake()
        return count

    def work_stats(self, user_id: str | None = None) -> WorkStats:
        """Messages pending, done and failed in the store (one user's, or everyone's)."""
        self._tiers.check_open()
        owner = None if user_id is None else check_user_id(user_id)
        stats: WorkStats = self._tiers.store.queue.work_stats(owner)
        return stats

    @property
    def pending(self) -> int:
        """Messages queued in this process and not yet in the store (``memory`` durability,
        or the working memory's queue): what a crash now would lose."""
        queued = self._keep.queued
        return queued.pending if queued is not None else 0

    # -- the operator's view (every user: for servers and dashboards) ------------------

    def users(self, limit: int = 100, after: str = "") -> list[str]:
        """Every user with messages or memories in the store, by id; pass the last id as
        ``after`` for the next page (an admin view: it reads across users)."""
        self._tiers.check_open()
        return list(self._tiers.store.transcript.users(limit, after))

    def size(self) -> int:
        """How many long-term memories the store holds, every user's."""
        from tiermem.stores.ops import TableSizeOp

        self._tiers.check_open()
        return int(self._tiers.store.batch([TableSizeOp()])[0])

    def replica_status(self) -> ReplicaStatus | None:
        """The PostgreSQL read replica as this process sees it (up, lag in bytes and
        seconds, reads served and routed to the primary); None without one."""
        self._tiers.check_open()
        return self._tiers.store.replica_status()

    def queue_status(self) -> dict[str, Any]:
        """This process's queue of messages not yet in the store (``memory`` durability):
        ``pending``, ``failures`` (batches retried) and ``last_error``."""
        queued = self._keep.queued
        error = queued.last_error if queued is not None else None
        return {
            "pending": queued.pending if queued is not None else 0,
            "failures": queued.failures if queued is not None else 0,
            "last_error": f"{type(error).__name__}: {error}" if error else None,
        }

    @property
    def location(self) -> str | None:
        """The SQLite file of the store, or None (PostgreSQL, or not opened from a path)."""
        return getattr(self._tiers.store, "path", None)

    def health(self) -> dict[str, str]:
        """Whether the store, the embedding model and the cache answer: ``"ok"`` or what
        failed, by part. Never raises (a readiness probe's view)."""
        return {
            "store": _probe(self.size),
            "model": _probe(lambda: self._tiers.embed(["ready"])),
            "cache": _probe(self._ping_cache),
        }

    def _ping_cache(self) -> None:
        ping = getattr(getattr(self._tiers.synopses, "cache", None), "ping", None)
        if ping is not None:
            ping()

    def end_run(self) -> None:
        """End a run. With ``single_run`` retention, every buffer and the working memory
        are cleared (seed 004's policy); otherwise nothing happens."""
        self._keep.end_run()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued messages are written, the store's pending work (embedding,
        summaries) is done and access counts are written; False on timeout (or when the
        store refused the counts)."""
        return self._keep.flush(check_timeout(timeout))

    def close(self, timeout: float | None = 30.0) -> None:
        """Write what is queued, index the store's pending messages (each up to
        ``timeout`` s: what is left stays pending in the store for the next worker) and
        release the store, cache connections and threads.

        Raises:
            StoreUnavailableError: the store never accepted some messages; they are in
                :attr:`unarchived`, to add again later. Everything else is released.
        """
        timeout = check_timeout(timeout)
        with self._tiers.lock:  # tiers built lazily check it under the same lock
            if self._tiers.closed:
                return
            self._tiers.closed = True
        archiver = self._keep.queued
        unwritten = archiver.close(timeout) if archiver is not None else []
        self._tiers.close(timeout)
        if unwritten and archiver is not None:
            self.unarchived = [item.message for item in unwritten]
            raise StoreUnavailableError(
                f"{len(unwritten)} messages could not be archived ({archiver.last_error}); "
                "they are in Memory.unarchived: add them again when the store is back"
            )

    ausers = twin(users)
    aqueue_status = stepped_twin(queue_status)
    asize = twin(size)
    ahealth = twin(health)
    awork_stats = twin(work_stats)
    afailed = twin(failed)
    aretry_failed = twin(retry_failed)
    aflush = twin(flush)
    aclose = twin(close)


def _probe(check: Any) -> str:
    """``"ok"``, or what ``check`` raised (a probe reports failures, never raises them)."""
    try:
        check()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300]
    return "ok"
