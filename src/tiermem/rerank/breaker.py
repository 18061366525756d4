"""A circuit breaker: a model that keeps failing is left alone for a while.

After ``failures`` failures in a row the breaker opens: :meth:`CircuitBreaker.allow`
says no, so the caller skips the model and returns what it has. Once ``cooldown``
seconds have passed, one call is let through (the probe, "half-open"): its success
closes the breaker, its failure opens it for another cool-down. Safe under threads;
time is read from a :class:`~tiermem.clock.Clock` (a ``ManualClock`` in tests).
"""

from __future__ import annotations

import threading
from typing import Literal

from tiermem.clock import SYSTEM_CLOCK, Clock
from tiermem.errors import InvalidSizeError

State = Literal["closed", "open", "half-open"]


class CircuitBreaker:
    """Counts consecutive failures of one dependency and says whether to call it.

    Args:
        failures: consecutive failures that open the breaker.
        cooldown: seconds it stays open before one probe call is let through.
        clock: where time is read (default: the real monotonic clock).
    """

    def __init__(
        self, failures: int = 3, cooldown: float = 30.0, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        if failures < 1:
            raise InvalidSizeError("failures", f"{failures} must be >= 1", "e.g. 3")
        if cooldown < 0:
            raise InvalidSizeError("cooldown", f"{cooldown} must be >= 0", "seconds, e.g. 30")
        self.failures = failures
        self.cooldown = cooldown
        self.clock = clock
        self._lock = threading.Lock()
        self._failed = 0
        self._opened_at = 0.0
        self._probing = False

    @property
    def state(self) -> State:
        """``closed`` (calls go through), ``open`` (skipped) or ``half-open`` (a probe
        may go, or is in flight)."""
        with self._lock:
            if self._failed < self.failures:
                return "closed"
            if self._probing or self._cooled():
                return "half-open"
            return "open"

    def allow(self) -> bool:
        """Whether to call now. True while closed; when open, True once per cool-down
        (the probe: report its outcome with :meth:`success`, :meth:`failure` or
        :meth:`abandon`)."""
        with self._lock:
            if self._failed < self.failures:
                return True
            if self._probing or not self._cooled():
                return False
            self._probing = True
            return True

    def success(self) -> None:
        """The call worked: the breaker closes."""
        with self._lock:
            self._failed = 0
            self._probing = False

    def failure(self) -> bool:
        """The call failed; True when this opened the breaker (or kept it open)."""
        with self._lock:
            self._failed += 1
            self._probing = False
            if self._failed >= self.failures:
                self._opened_at = self.clock.monotonic()
                return True
            return False

    def abandon(self) -> None:
        """The call ended with no verdict (cancelled, or never started): a probe's turn
        is given back, nothing is counted."""
        with self._lock:
            self._probing = False

    def _cooled(self) -> bool:
        return self.clock.monotonic() - self._opened_at >= self.cooldown

    def __repr__(self) -> str:
        return f"CircuitBreaker({self.state}, failures={self._failed}/{self.failures})"
