"""A process that only works: the claimed work of a store, beside add-only front ends.

``memory.worker.background: false`` makes a :class:`~tiermem.Memory` add-only: ``add``
commits the transcript row and returns, and no thread of that process competes with the
next request for the cores. :class:`WorkerProcess` is the other half (``tiermem
worker``): it runs the store worker's rounds (index rows, session summaries, facts) on
a thread of its own, as many processes as wanted on one store, each claiming with a
lease, and reports what it sees of the queue for a health check and /metrics.

Stopping is clean: :meth:`WorkerProcess.stop` lets the round in hand end (up to a grace
period), then gives back every row this process still holds (``ReleaseOp``, due at once)
so another worker takes them without waiting for the lease. A process killed outright
loses nothing either: its rows are claimed again when their lease expires.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from tiermem.errors import InvalidSizeError, TiermemError

if TYPE_CHECKING:
    from tiermem.memory import Memory

log = logging.getLogger(__name__)

RATE_WINDOW = 60.0
"""Seconds over which :meth:`WorkerProcess.figures` reports the indexing rate."""


class WorkerProcess:
    """Runs ``memory``'s store worker in this process until :meth:`stop`.

    Args:
        memory: the configured memory (its store, embedder, summarizer, facts); nothing
            else of it is used. Build it with ``memory.worker.background: false`` or not:
            nothing here adds messages, so its own thread never starts.
        idle: seconds between looks at the store while there is no work.
    """

    def __init__(self, memory: Memory, *, idle: float = 0.5) -> None:
        if not idle > 0:
            raise InvalidSizeError("idle", f"must be > 0, got {idle}", "e.g. idle=0.5")
        self._memory = memory
        self.worker = memory.worker
        self.store = memory.store
        self.idle = idle
        self.indexed = 0
        """Rows this process indexed since it started."""
        self.errors = 0
        """Rounds that failed (the store or the model unreachable) since start."""
        self.last_error: BaseException | None = None
        self.started = time.time()
        self._done: deque[tuple[float, int]] = deque()  # (when, rows) of recent rounds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def owner(self) -> str:
        """The name this process's claims carry."""
        return str(self.worker.owner)

    def start(self) -> None:
        """Work on a background thread until :meth:`stop`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name="tiermem-worker", daemon=True)
            self._thread.start()

    def alive(self) -> bool:
        """Whether the working thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def run(self) -> None:
        """Work in the calling thread until :meth:`stop`: one round after another, a look
        every ``idle`` seconds while there is nothing to claim."""
        while not self._stop.is_set():
            try:
                done = self.worker.run_once()
            except Exception as exc:  # the store or the model is down: try again later
                self.errors += 1
                self.last_error = exc
                log.warning("worker round failed: %s; retrying in %.1fs", exc, self.idle)
                done = 0
            if done:
                self._count(done)
            else:
                self._stop.wait(self.idle)

    def _count(self, rows: int) -> None:
        now = time.monotonic()
        self.indexed += rows
        self._done.append((now, rows))
        while self._done and self._done[0][0] < now - RATE_WINDOW:
            self._done.popleft()

    def rate(self) -> float:
        """Rows indexed per second over the last minute (or since start, if sooner)."""
        now = time.monotonic()
        recent = sum(rows for when, rows in self._done if when >= now - RATE_WINDOW)
        span = min(RATE_WINDOW, max(time.time() - self.started, 1e-9))
        return recent / span

    def stop(self, grace: float = 10.0) -> int:
        """Stop claiming, let the round in hand end for up to ``grace`` seconds, then
        give back every row still held (due at once) and release the store; the rows
        given back. A round still running after ``grace`` completes nothing more: its
        rows are no longer its own."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(grace)
        given_back = 0
        try:
            held = self.store.queue.held(self.owner)
            if held:
                given_back = self.store.queue.release(self.owner, held, 0.0)
        except TiermemError as exc:  # the store is down: the leases expire instead
            log.warning("giving back claimed rows failed (%s); their leases expire", exc)
        facts = self.worker.facts
        if facts is not None:
            facts.close(grace)
        if self._thread is None or not self._thread.is_alive():
            self.store.close()
        return given_back

    def figures(self) -> dict[str, float | None]:
        """The queue and this process's work, for /metrics (None: the store did not answer)."""
        try:
            queue: Any = self.store.queue.queue_stats()
        except TiermemError:
            queue = None
        lag = None
        if queue is not None:
            lag = (
                0.0
                if queue.oldest_pending is None
                else max(0.0, self.store.clock.time() - queue.oldest_pending)
            )
        return {
            "pending_work": None if queue is None else float(queue.pending),
            "claimed_work": None if queue is None else float(queue.claimed),
            "failed_work": None if queue is None else float(queue.failed),
            "pending_lag_seconds": lag,
            "worker_indexed_rows": float(self.indexed),
            "worker_index_rate": self.rate(),
            "worker_errors": float(self.errors),
        }

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Whether this process works (its thread runs and the store answers), and why."""
        figures = self.figures()
        ok = self.alive() and figures["pending_work"] is not None
        return ok, {
            "status": "ok" if ok else "unhealthy",
            "owner": self.owner,
            "working": self.alive(),
            "store": figures["pending_work"] is not None,
            "indexed": self.indexed,
            "last_error": None if self.last_error is None else str(self.last_error),
        }
