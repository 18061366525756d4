"""Group commit: concurrent ``POST /v1/messages`` requests share one store transaction.

Each request's messages are validated on their own (:meth:`Memory.stage_messages`), then
queued. One writer (a :class:`~tiermem.runner.Runner`) takes everything queued, commits
it in one transaction and answers each request; requests that arrive meanwhile form the
next group. Alone, a request commits at once; under load one transaction and one thread
hop carry many requests, where each used to pay its own. A request is answered only
after its group committed, so an acknowledgement still means durable.

A group whose transaction fails for a reason other than an unreachable store is committed
again request by request, so a request that cannot be written fails alone and the others
of its group are still written and acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tiermem.errors import StoreUnavailableError
from tiermem.runner import Runner

MAX_GROUP = 256
"""Requests per transaction at most (a bound on one transaction's size and time)."""

Written = Callable[[], None]
"""What to do, in the writer thread, once a request's messages are committed."""

Settled = list[tuple[asyncio.Future[None], BaseException | None]]
"""Requests' futures and their outcome (None: committed)."""


class _Pending:
    __slots__ = ("done", "op", "written")

    def __init__(self, op: Any, written: Written | None, done: asyncio.Future[None]) -> None:
        self.op = op
        self.written = written
        self.done = done


class GroupCommit:
    """Commits staged writes in groups, one transaction per group, on one thread.

    Args:
        commit: writes ops in one transaction, all or none (:meth:`Memory.commit_staged`).
        max_group: requests per transaction at most.
    """

    def __init__(self, commit: Callable[[Sequence[Any]], None], max_group: int = MAX_GROUP):
        self._commit = commit
        self.max_group = max_group
        self._queue: list[_Pending] = []
        self._lock = threading.Lock()
        self._closed = False
        self._runner = self._new_runner()
        self.groups = 0
        """Transactions tried (a group retried request by request counts once)."""

    def _new_runner(self) -> Runner:
        return Runner(self._round, name="tiermem-group-commit")

    async def write(self, op: Any, written: Written | None = None) -> None:
        """Commit ``op`` (with whatever else is queued); returns once it is committed and
        ``written`` has run, or raises the error that kept it from being written."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.add_done_callback(_retrieve)
        with self._lock:
            if self._closed:
                raise StoreUnavailableError("the server is shutting down")
            self._queue.append(_Pending(op, written, done))
        self._runner.wake(now=True)  # no gathering: what queued meanwhile is the group
        # shielded: a client that goes away does not cancel a write others share
        await asyncio.shield(done)

    def close(self, timeout: float | None = 30.0) -> None:
        """Commit what is queued and stop the thread (writes meanwhile are refused; a
        later write starts it again, as an app that is started again needs)."""
        with self._lock:
            self._closed = True
            queued = bool(self._queue)
        if queued:
            self._runner.flush(timeout)
        self._runner.close(timeout)  # after the group in hand
        with self._lock:
            self._closed = False
            self._runner = self._new_runner()

    def _round(self) -> bool:
        """Commit one group (what is queued, up to ``max_group``); whether more is queued."""
        with self._lock:
            group = self._queue[: self.max_group]
            del self._queue[: len(group)]
        if not group:
            return False
        _answer(group, self._write_group(group))
        with self._lock:
            return bool(self._queue)

    def _write_group(self, group: Sequence[_Pending]) -> list[BaseException | None]:
        """One transaction for the group; if it fails, one per request. Each request's
        error, or None."""
        self.groups += 1
        try:
            self._commit([p.op for p in group])
        except StoreUnavailableError as exc:  # the same for every request: no retry
            return [exc] * len(group)
        except Exception as exc:
            if len(group) == 1:
                return [exc]
            return [self._write_alone(p) for p in group]
        return [_after(p.written) for p in group]

    def _write_alone(self, pending: _Pending) -> BaseException | None:
        try:
            self._commit([pending.op])
        except Exception as exc:
            return exc
        return _after(pending.written)


def _after(written: Written | None) -> BaseException | None:
    if written is None:
        return None
    try:
        written()
    except Exception as exc:
        return exc
    return None


def _answer(group: Sequence[_Pending], errors: Sequence[BaseException | None]) -> None:
    """Settle the group's futures from the writer thread: one call on each request's loop
    (one wake of the loop for the whole group)."""
    loops: dict[asyncio.AbstractEventLoop, Settled] = {}
    for pending, error in zip(group, errors, strict=True):
        loops.setdefault(pending.done.get_loop(), []).append((pending.done, error))
    for loop, settled in loops.items():
        with contextlib.suppress(RuntimeError):  # the requests' loop is gone: nobody waits
            loop.call_soon_threadsafe(_settle, settled)


def _settle(settled: Settled) -> None:
    for done, error in settled:
        if done.done():
            continue
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)


def _retrieve(done: asyncio.Future[None]) -> None:
    """Mark an error as seen when the request that waited for it went away."""
    if not done.cancelled():
        done.exception()
