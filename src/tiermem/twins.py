"""Async twins of blocking methods, typed as the methods they run.

``asearch = twin(search)`` in a class body gives ``await obj.asearch(...)`` the very
signature of ``search`` (users' type checkers see every parameter) and runs the call in a
thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def twin(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The coroutine twin of ``method``: the same arguments, run in a worker thread."""

    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    name = getattr(method, "__name__", "method")
    run.__name__ = run.__qualname__ = f"a{name}"
    run.__doc__ = f"Async twin of :meth:`{name}` (runs in a thread, off the event loop)."
    return run
