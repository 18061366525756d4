"""Async twins of blocking methods, typed as the methods they run.

``asearch = twin(search)`` in a class body gives ``await obj.asearch(...)`` the very
signature of ``search`` (users' type checkers see every parameter) and runs the call in a
thread, off the event loop.

A method whose waits are few and known (an op a store runs, texts to embed) is written
once, as a generator of those waits (:data:`Steps`), and gets both forms from it:
``@stepped`` runs each wait with the object's ``_step``, ``stepped_twin`` awaits each one
with its ``_astep``: the checks and the shaping of the answer exist once. ``at_once`` is
the twin of an in-memory method that never waits: it runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Concatenate, ParamSpec, Protocol, TypeAlias, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

Steps: TypeAlias = Generator[Any, Any, R]
"""A method's body: yields each wait, receives its answer, returns the result."""


class Stepper(Protocol):
    """An object that runs the waits of its :func:`stepped` methods."""

    def _step(self, step: Any, /) -> Any: ...

    async def _astep(self, step: Any, /) -> Any: ...


W = TypeVar("W", bound=Stepper)


def twin(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The coroutine twin of ``method``: the same arguments, run in a worker thread."""

    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    _async_name(run, method, "(runs in a thread, off the event loop)")
    return run


def at_once(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The coroutine twin of an in-memory ``method`` that never waits on I/O: run at once,
    on the event loop (a thread would cost more than the work)."""

    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(self, *args, **kwargs)

    _async_name(run, method, "(in memory: runs at once, never blocks on I/O)")
    return run


def stepped(work: Callable[Concatenate[W, P], Steps[R]]) -> Callable[Concatenate[W, P], R]:
    """The blocking method of ``work``: each wait run by ``self._step``."""

    def run(self: W, /, *args: P.args, **kwargs: P.kwargs) -> R:
        steps = work(self, *args, **kwargs)
        answer = None
        try:
            while True:
                answer = self._step(steps.send(answer))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    run.__name__ = run.__qualname__ = getattr(work, "__name__", "method")
    run.__doc__ = work.__doc__
    run.__steps__ = work  # type: ignore[attr-defined]
    return run


def stepped_twin(
    method: Callable[Concatenate[W, P], R],
    *,
    threads_unless: Callable[[Any], bool] | None = None,
) -> Callable[Concatenate[W, P], Coroutine[Any, Any, R]]:
    """The async twin of a :func:`stepped` method: each wait awaited with ``self._astep``
    (or, where ``threads_unless(self)`` is false, ``method`` whole in one thread)."""
    work: Callable[..., Steps[R]] = method.__steps__  # type: ignore[attr-defined]

    async def run(self: W, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if threads_unless is not None and not threads_unless(self):
            return await asyncio.to_thread(method, self, *args, **kwargs)
        steps = work(self, *args, **kwargs)
        answer = None
        try:
            while True:
                answer = await self._astep(steps.send(answer))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    _async_name(run, method)
    return run


def _async_name(run: Callable[..., Any], method: Callable[..., Any], how: str = "") -> None:
    """``run`` named and documented as the ``a``-prefixed twin of ``method``."""
    name = getattr(method, "__name__", "method")
    run.__name__ = run.__qualname__ = f"a{name}"
    run.__doc__ = f"Async twin of :meth:`{name}`" + (f" {how}." if how else ".")
