"""Sync and async from one source: a method's async twin is made, never written by hand.

There are three sources, and every async method of the library comes from one of them
(``tests/test_architecture.py`` keeps it so; docs/architecture.md, Sync and async):

- **Thread twins**: ``asearch = twin(search)`` in a class body gives
  ``await obj.asearch(...)`` the very signature of ``search`` (users' type checkers see
  every parameter) and runs the call in a thread, off the event loop: for blocking work.
- **Stepped methods**: a method whose waits are few and known (an op a store runs, texts
  to embed, an HTTP request) is written once, as a generator of those waits
  (:data:`Steps`), and gets both forms from it: ``@stepped`` runs each wait with the
  object's ``_step``, ``stepped_twin`` awaits each one with its ``_astep``: the checks and
  the shaping of the answer exist once. A wait may be a :class:`Call` of another
  object's twin pair (a class of :class:`Calls` runs it), a :class:`Gather` of several,
  or :func:`either` (a caller's function that may be async). An in-memory method has no
  waits at all: ``stepped_twin`` of a plain method runs it at once, on the event loop (a
  thread would cost more than the work).
- **Plans**: a store read is a generator of statements (:mod:`tiermem.stores.plans`), run
  by the same two drivers with a connection's ``execute``.

:func:`drive` and :func:`adrive` are those two drivers: the only loops that step a
generator of waits, one blocking and one awaiting.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
from typing import Any, Concatenate, ParamSpec, TypeAlias, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

Steps: TypeAlias = Generator[Any, Any, R]
"""A method's body: yields each wait, receives its answer, returns the result."""


def drive(steps: Steps[R], step: Callable[[Any], Any]) -> R:
    """The result of ``steps``, each wait run by ``step``; a wait's error is raised in
    the generator, at its ``yield`` (it may catch it)."""
    answer: Any = None
    failed: BaseException | None = None
    while True:
        try:
            wait = steps.send(answer) if failed is None else steps.throw(failed)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            failed = None
        try:
            answer = step(wait)
        except Exception as exc:
            failed = exc


async def adrive(steps: Steps[R], astep: Callable[[Any], Awaitable[Any]]) -> R:
    """:func:`drive` awaiting each wait with ``astep``."""
    answer: Any = None
    failed: BaseException | None = None
    while True:
        try:
            wait = steps.send(answer) if failed is None else steps.throw(failed)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            failed = None
        try:
            answer = await astep(wait)
        except Exception as exc:
            failed = exc


def twin(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The coroutine twin of ``method``: the same arguments, run in a worker thread."""

    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    _async_name(run, method, "(runs in a thread, off the event loop)")
    return run


def stepped(work: Callable[Concatenate[S, P], Steps[R]]) -> Callable[Concatenate[S, P], R]:
    """The blocking method of ``work``: each wait run by ``self._step`` (the class's one
    way to run a wait; ``_astep``, its awaiting form, serves :func:`stepped_twin`)."""

    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return drive(work(self, *args, **kwargs), self._step)  # type: ignore[attr-defined]

    run.__name__ = run.__qualname__ = getattr(work, "__name__", "method")
    run.__doc__ = work.__doc__
    run.__steps__ = work  # type: ignore[attr-defined]
    return run


def stepped_twin(
    method: Callable[Concatenate[Any, P], R],
    *,
    threads_unless: Callable[[Any], bool] | None = None,
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The async twin of a :func:`stepped` method: each wait awaited with ``self._astep``
    (or, where ``threads_unless(self)`` is false, ``method`` whole in one thread). A
    method that is not stepped has no waits (in memory): its twin runs it at once. Typed
    by the method's parameters (``self`` is any: a subclass's twin may stand for a
    base's abstract coroutine)."""
    work: Callable[..., Steps[R]] | None = getattr(method, "__steps__", None)
    if work is None:

        async def at_once(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return method(self, *args, **kwargs)

        _async_name(at_once, method, "(in memory: runs at once, never blocks on I/O)")
        return at_once

    async def run(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if threads_unless is not None and not threads_unless(self):
            return await asyncio.to_thread(method, self, *args, **kwargs)
        return await adrive(work(self, *args, **kwargs), self._astep)

    _async_name(run, method)
    return run


class Call:
    """A wait that is a call of a twin pair: :meth:`run` calls ``blocking``, :meth:`arun`
    awaits ``awaiting`` instead (None: ``blocking`` in a thread, for CPU or blocking work)."""

    __slots__ = ("args", "awaiting", "blocking", "kwargs")

    def __init__(
        self,
        blocking: Callable[..., Any],
        awaiting: Callable[..., Awaitable[Any]] | None,
        /,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self.blocking, self.awaiting, self.args, self.kwargs = blocking, awaiting, args, kwargs

    def run(self) -> Any:
        return self.blocking(*self.args, **self.kwargs)

    async def arun(self) -> Any:
        if self.awaiting is None:
            return await asyncio.to_thread(self.blocking, *self.args, **self.kwargs)
        return await self.awaiting(*self.args, **self.kwargs)


class Gather:
    """A wait on several :class:`Call`s: one after the other when blocking, all at once
    when awaited (``asyncio.gather``); their answers in order."""

    __slots__ = ("calls",)

    def __init__(self, calls: Iterable[Call]) -> None:
        self.calls = list(calls)

    def run(self) -> list[Any]:
        return [call.run() for call in self.calls]

    async def arun(self) -> list[Any]:
        return list(await asyncio.gather(*(call.arun() for call in self.calls)))


def either(function: Callable[..., Any], /, *args: Any, refused: Callable[[], Exception]) -> Call:
    """A wait on a caller's ``function`` that may be a coroutine function: awaited, what
    it returns is awaited when awaitable; run blocking, an awaitable is closed unawaited
    and ``refused()`` raised (the error that names the async method to call instead)."""

    def blocking() -> Any:
        result = function(*args)
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()  # never awaited: closed, so no warning
            raise refused()
        return result

    async def awaiting() -> Any:
        result = function(*args)
        return await result if inspect.isawaitable(result) else result

    return Call(blocking, awaiting)


class Calls:
    """A class whose stepped methods wait on :class:`Call`s (another object's twins) or
    :class:`Gather`s of them."""

    def _step(self, wait: Call | Gather, /) -> Any:
        return wait.run()

    async def _astep(self, wait: Call | Gather, /) -> Any:
        return await wait.arun()


def _async_name(run: Callable[..., Any], method: Callable[..., Any], how: str = "") -> None:
    """``run`` named and documented as the ``a``-prefixed twin of ``method``."""
    name = getattr(method, "__name__", "method")
    run.__name__ = run.__qualname__ = f"a{name}"
    run.__doc__ = f"Async twin of :meth:`{name}`" + (f" {how}." if how else ".")
