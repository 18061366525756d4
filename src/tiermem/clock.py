"""Time for background loops and leases: the real clock, or a manual one that tests move.

Every background loop (:class:`~tiermem.runner.Runner`) waits on a :class:`Clock`: its idle
interval, the gathering of a burst after a wake, its backoff after an error. A store takes
the "now" of its leases from one too (:attr:`tiermem.stores.protocol.MemoryStore.clock`): a
lease is a wall-clock time written to the database, which every process compares with its
own clock. A test gives a :class:`ManualClock` and expires a lease, or ends a backoff, by
advancing it instead of sleeping. A caller's own timeout (``flush(timeout)``,
``close(timeout)``) is real time on every clock, so a test never hangs on a clock nobody
moves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tiermem.errors import InvalidSizeError


class Clock:
    """The real clock: :func:`time.monotonic` for intervals, :func:`time.time` for
    leases (a time other processes read), and a condition's own timed wait."""

    def monotonic(self) -> float:
        """Seconds for measuring intervals in this process."""
        return time.monotonic()

    def time(self) -> float:
        """Seconds since the epoch: the time leases are written in and compared with."""
        return time.time()

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        """Wait on ``cond`` (held by the caller) until notified or this clock's
        :meth:`monotonic` reaches ``deadline`` (None: no limit); it may return early
        (callers recheck what they wait for)."""
        cond.wait(None if deadline is None else max(deadline - self.monotonic(), 0.0))

    def wait_for(
        self, cond: threading.Condition, predicate: Callable[[], bool], seconds: float | None
    ) -> bool:
        """Wait on ``cond`` (held) until ``predicate()`` holds or ``seconds`` of this clock
        pass (None: no limit); the predicate's last value."""
        deadline = None if seconds is None else self.monotonic() + seconds
        while not predicate():
            if deadline is not None and self.monotonic() >= deadline:
                return False
            self.wait(cond, deadline)
        return True


SYSTEM_CLOCK = Clock()
"""The clock every loop and store uses unless given another."""


class ManualClock(Clock):
    """A clock that moves only when :meth:`advance` is called; for tests.

    Its wall time starts at ``start`` (default: the real time now, so timestamps written
    with it stay plausible). A wait on it ends when its condition is notified or the clock
    is advanced (its waiter then rechecks its deadline); :meth:`settle` lets a test wait
    until a loop is in such a wait before it advances the clock.
    """

    def __init__(self, start: float | None = None) -> None:
        self._state = threading.Condition()
        self._elapsed = 0.0
        self._start = time.time() if start is None else float(start)
        self._waiting: list[threading.Condition] = []

    def monotonic(self) -> float:
        with self._state:
            return self._elapsed

    def time(self) -> float:
        with self._state:
            return self._start + self._elapsed

    @property
    def waiting(self) -> int:
        """Waits in progress on this clock."""
        with self._state:
            return len(self._waiting)

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        with self._state:  # advance() either sees this wait or ran before the check
            if deadline is not None and self._elapsed >= deadline:
                return
            self._waiting.append(cond)
            self._state.notify_all()
        try:
            cond.wait()  # until notified or advanced (advance notifies every waiter)
        finally:
            with self._state:
                self._waiting.remove(cond)

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward and wake every wait on it."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise InvalidSizeError("seconds", f"must be a number >= 0, got {seconds!r}")
        with self._state:
            self._elapsed += seconds
            waiting = list(dict.fromkeys(self._waiting))
        for cond in waiting:
            with cond:
                cond.notify_all()

    def settle(self, waits: int = 1, timeout: float = 5.0) -> bool:
        """Wait (real time, up to ``timeout``) until at least ``waits`` waits are in
        progress on this clock: the loops have reached their wait; False on timeout."""
        with self._state:
            return self._state.wait_for(lambda: len(self._waiting) >= waits, timeout)
