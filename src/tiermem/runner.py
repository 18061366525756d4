"""One background runner for every loop: wake, gather, idle, backoff, flush and close.

Every background loop of the library is a :class:`Runner` around a *round*: a function
that does one unit of work and returns whether more is waiting at once. The runner owns
the thread (started on the first :meth:`~Runner.wake` or :meth:`~Runner.start`) and gives
every loop the same behaviour:

* a wake runs a round soon: after ``gather`` seconds, so a burst of wakes is handled in
  one round (``wake(now=True)`` and a flush skip the gathering);
* a round that reports more work is followed by the next one at once; otherwise the
  thread waits for a wake, or ``idle`` seconds when the loop also looks on its own;
* a round that raises is retried after a backoff that doubles up to a cap
  (:class:`Backoff`) and starts over after a round that succeeds;
* :meth:`~Runner.flush` waits until a round begun after the call found no more work;
* :meth:`~Runner.close` ends the waits at once and lets the round in hand finish;
* a loop that holds leases gives ``renew``: it is called every ``renew_every`` seconds
  while the runner is up, so a round slower than a lease does not lose its work.

Every wait is on a :class:`~tiermem.clock.Clock`, so a test with a
:class:`~tiermem.clock.ManualClock` moves a loop's time instead of sleeping. The loops:
the store worker (:mod:`tiermem.work.worker`), the fact worker's sweep
(:mod:`tiermem.facts.worker`), the access log (:mod:`tiermem.memory.access`), the archiver
(:mod:`tiermem.work.archiver`), the server's group commit (:mod:`tiermem.server.commits`)
and the working memory's cleanup
(:mod:`tiermem.working.memory`). Jobs on a thread pool are not loops and do not use it: fact
extractions and buffer summaries (:mod:`tiermem.summaries.worker`) run on small shared
pools, one job per session or buffer; they take their retry waits from
:func:`backoff_delay` and a clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tiermem.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

Round = Callable[[], object]
"""One unit of a loop's work; truthy when more is waiting at once."""

OnError = Callable[[Exception, float], None]
"""Told of a round's error and the seconds until the next try."""


def backoff_delay(first: float, attempt: int, cap: float = float("inf")) -> float:
    """``first`` doubled ``attempt`` times (0: ``first``), at most ``cap``."""
    return min(first * 2.0 ** min(max(attempt, 0), 64), cap)


class Backoff:
    """A wait that doubles on each :meth:`next` up to ``cap``; :meth:`reset` starts over."""

    def __init__(self, first: float, cap: float) -> None:
        self.first = first
        self.cap = cap
        self.streak = 0
        """Waits handed out since the last reset."""

    def next(self) -> float:
        """The wait before the next try (then the following one doubles)."""
        wait = backoff_delay(self.first, self.streak, self.cap)
        self.streak += 1
        return wait

    def reset(self) -> None:
        self.streak = 0


class Runner:
    """Runs ``round`` on its own thread: on a wake, every ``idle`` seconds, and again at
    once while it reports more work.

    Args:
        round: one unit of work; returns whether more is waiting at once.
        name: the thread's name.
        clock: where the runner's waits take their time (default: the real clock).
        idle: seconds between rounds nobody woke (None: only wakes start rounds).
        gather: seconds a wake waits before its round, so a burst is handled in one.
        backoff: the wait after a round that raised (default: 1 s doubling up to 30 s).
        on_error: told of each error and the wait before the next try (default: a
            warning in the log).
        renew: renews the leases the loop holds (a no-op when it holds none); called
            every ``renew_every`` seconds of the clock, on a thread of its own, from
            the runner's start to its close, so a slow round keeps its leases.
        renew_every: seconds between renewals (a fraction of the lease).
    """

    def __init__(
        self,
        round: Round,
        *,
        name: str,
        clock: Clock | None = None,
        idle: float | None = None,
        gather: float = 0.0,
        backoff: Backoff | None = None,
        on_error: OnError | None = None,
        renew: Round | None = None,
        renew_every: float = 10.0,
    ) -> None:
        self._round = round
        self.name = name
        self.clock = clock or SYSTEM_CLOCK
        self.idle = idle
        self.gather = gather
        self.backoff = backoff or Backoff(1.0, 30.0)
        self._on_error = on_error or self._log_error
        self.rounds = 0
        """Rounds finished on the thread (those that raised included)."""
        self.errors = 0
        """Rounds that raised."""
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._wanted = False  # a wake since the last round began
        self._urgent = False  # ... that should not gather
        self._flushing = 0  # callers waiting in flush()
        self._closed = False
        self._begun = 0  # rounds begun (each has this number as its ticket)
        self._settled = 0  # the last round that found no more work
        self._renewer: Runner | None = None
        if renew is not None:

            def renew_round() -> bool:
                renew()
                return False

            self._renewer = Runner(renew_round, name=f"{name}-lease", clock=clock, idle=renew_every)

    # -- control --

    @property
    def running(self) -> bool:
        """Whether the thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Start the thread without a wake (a timer's first round comes after ``idle``)."""
        with self._cond:
            self._start()

    def wake(self, now: bool = False) -> None:
        """Run a round soon (after ``gather``; ``now``: without gathering); starts the
        thread on first use. Does nothing once closed."""
        with self._cond:
            if self._closed:
                return
            self._wanted = True
            self._urgent = self._urgent or now
            self._start()
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wake the thread and wait until a round begun after this call found no more
        work; False at ``timeout`` (real seconds) or when the runner is closed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self._closed:
                return False
            target = self._begun
            self._flushing += 1
            self._wanted = True
            self._start()
            self._cond.notify_all()
            try:
                while self._settled <= target:
                    if self._closed:
                        return False
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._cond.wait(left)
            finally:
                self._flushing -= 1
        return True

    def close(self, timeout: float | None = 30.0) -> bool:
        """Stop: waits end at once, the round in hand finishes; whether the thread ended
        within ``timeout`` (real seconds). A closed runner does not start again."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if self._renewer is not None:
            self._renewer.close(timeout)
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()

    # -- the thread --

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
            if self._renewer is not None:
                self._renewer.start()

    def _loop(self) -> None:
        more = False
        while True:
            with self._cond:
                if not more:
                    self._wait_for_work()
                if self._closed:
                    self._cond.notify_all()
                    return
                self._wanted = self._urgent = False
                self._begun += 1
                ticket = self._begun
            try:
                more = bool(self._round())
            except Exception as exc:
                wait = self.backoff.next()
                self.errors += 1
                self._on_error(exc, wait)
                with self._cond:
                    self.rounds += 1
                    self.clock.wait_for(self._cond, lambda: self._closed, wait)
                more = True  # try again once the backoff is over
                continue
            self.backoff.reset()
            with self._cond:
                self.rounds += 1
                if not more:
                    self._settled = ticket
                    self._cond.notify_all()

    def _wait_for_work(self) -> None:
        """Wait (holding the condition) for a wake, the idle interval or close; then let a
        burst gather unless a flush or an urgent wake is waiting."""
        self.clock.wait_for(self._cond, lambda: self._wanted or self._closed, self.idle)
        if self._wanted and self.gather > 0 and not (self._urgent or self._flushing):
            self.clock.wait_for(
                self._cond, lambda: self._closed or self._urgent or self._flushing > 0, self.gather
            )

    def _log_error(self, exc: Exception, wait: float) -> None:
        log.warning("%s: %s; retrying in %.1fs", self.name, exc, wait)


__all__ = ["Backoff", "Runner", "backoff_delay"]


_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def shared_pool(name: str, threads: int) -> ThreadPoolExecutor:
    """The process's pool of ``threads`` named ``tiermem-{name}``, made on first use and
    shared by every caller that names it (a process that never needs one starts none)."""
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(threads, thread_name_prefix=f"tiermem-{name}")
        return pool
