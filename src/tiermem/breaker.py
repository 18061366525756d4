"""Circuit breakers: a model that keeps failing is left alone for a while.

Every model tiermem calls sits behind one (docs/llm.md): the chat model where it writes
summaries, extracts facts or writes a synopsis, the HTTP embedder, a reranker. After
``failures`` failures in a row the breaker opens: :meth:`CircuitBreaker.allow` says no,
so the caller skips the model and does what it does without it (the offline summarizer,
facts that wait, the offline synopsis, rows given back, the first-stage order). Once
``cooldown`` seconds have passed, one call is let through (the probe, "half-open"): its
success closes the breaker, its failure opens it for another cool-down. Safe under
threads; time is read from a :class:`~tiermem.clock.Clock` (a ``ManualClock`` in tests).

:func:`breaker_for` gives the breaker of a model object (its own ``breaker`` attribute
if it has one, else one kept here per object, so the summaries, facts and synopsis that
share a chat model share its breaker); :func:`guarded` and :func:`aguarded` run one call
behind it and raise :class:`CircuitOpenError` at once while it is open.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from tiermem.clock import SYSTEM_CLOCK, Clock
from tiermem.errors import (
    AuthenticationError,
    InputError,
    InvalidSizeError,
    ProviderResponseError,
    ProviderServerError,
    ProviderUnavailableError,
    TiermemError,
)

State = Literal["closed", "open", "half-open"]
T = TypeVar("T")


class CircuitOpenError(ProviderUnavailableError):
    """A call was skipped: the model's breaker is open (it failed several times in a row
    and rests until its cool-down ends). Callers treat it as the model being down."""


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

    @property
    def failed(self) -> int:
        """Consecutive failures counted so far (0 after a success)."""
        return self._failed

    def retry_in(self) -> float:
        """Seconds until the next probe may go (0 when closed or cooled down)."""
        with self._lock:
            if self._failed < self.failures:
                return 0.0
            return max(self._opened_at + self.cooldown - self.clock.monotonic(), 0.0)

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


# -- one breaker per model ----------------------------------------------------------------

_breakers: weakref.WeakKeyDictionary[object, CircuitBreaker] = weakref.WeakKeyDictionary()
_unhashable: dict[int, CircuitBreaker] = {}
_lock = threading.Lock()


def breaker_for(model: object) -> CircuitBreaker:
    """The breaker of ``model``: its own ``breaker`` attribute when that is a
    :class:`CircuitBreaker` (set one to choose the settings), else one kept per model
    object (3 failures, 30 s), created on first use."""
    own = getattr(model, "breaker", None)
    if isinstance(own, CircuitBreaker):
        return own
    with _lock:
        try:
            found = _breakers.get(model)
            if found is None:
                found = _breakers[model] = CircuitBreaker()
        except TypeError:  # not hashable or not weakly referable
            found = _unhashable.setdefault(id(model), CircuitBreaker())
        return found


def model_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the model is down rather than refusing one input: it is
    unreachable, too slow, rate limited or failing (5xx), its breaker is open, it rejects
    the credentials, or it raised a connection-level error of its own (Python's
    ``ConnectionError``, ``TimeoutError`` or another ``OSError``, as a user's own model
    class may). Such an error would fail any input alike."""
    if isinstance(exc, (ProviderUnavailableError, AuthenticationError)):
        return True
    return isinstance(exc, OSError) and not isinstance(exc, TiermemError)


def _verdict(breaker: CircuitBreaker, exc: BaseException) -> None:
    """Tell ``breaker`` how a call that raised ``exc`` went."""
    if not isinstance(exc, Exception) or isinstance(exc, InputError):
        breaker.abandon()  # cancelled, or the caller's own bad input: no verdict
    elif isinstance(exc, ProviderResponseError) and not isinstance(exc, ProviderServerError):
        breaker.success()  # it answered (a refusal, a malformed answer): it is up
    else:
        breaker.failure()  # down, or an unknown error of a model of one's own


def _skipped(model: object, breaker: CircuitBreaker) -> CircuitOpenError:
    name = getattr(model, "model_id", None) or type(model).__name__
    return CircuitOpenError(
        f"{name}: skipped, it failed {breaker.failed} times in a row; "
        f"the next try is in {breaker.retry_in():.1f}s"
    )


def guarded(model: object, call: Callable[[], T], breaker: CircuitBreaker | None = None) -> T:
    """``call()`` (which calls ``model``) behind the model's breaker.

    Raises:
        CircuitOpenError: the breaker is open; ``call`` was not made.
        Exception: whatever ``call`` raised, after the breaker counted it (a failure
            unless the model answered: a refusal or a malformed answer closes it).
    """
    guard = breaker or breaker_for(model)
    if not guard.allow():
        raise _skipped(model, guard)
    try:
        result = call()
    except BaseException as exc:
        _verdict(guard, exc)
        raise
    guard.success()
    return result


async def aguarded(
    model: object, call: Callable[[], Awaitable[T]], breaker: CircuitBreaker | None = None
) -> T:
    """Async twin of :func:`guarded` (``call`` returns the awaitable to wait for)."""
    guard = breaker or breaker_for(model)
    if not guard.allow():
        raise _skipped(model, guard)
    try:
        result = await call()
    except BaseException as exc:
        _verdict(guard, exc)
        raise
    guard.success()
    return result


__all__ = [
    "CircuitBreaker",
    "CircuitOpenError",
    "State",
    "aguarded",
    "breaker_for",
    "guarded",
    "model_unavailable",
]
