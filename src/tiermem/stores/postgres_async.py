"""Async connections to PostgreSQL: one psycopg ``AsyncConnectionPool`` per event loop.

An async pool belongs to the loop that opened it, and a store may be awaited from several
(a server's loop, ``asyncio.run`` in a script, a test's loop each), so each loop gets its
own pool, sized and configured as the sync one (same timeout, same health check on
checkout's timeout, same ``synchronous_commit`` session default; no test of each
connection on checkout: see :meth:`AsyncPools.recheck`), in autocommit: a batch opens its
transaction itself. A pool whose loop is gone is dropped with it.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from tiermem.stores.pgsetup import pool_options

CLOSE_TIMEOUT = 5.0
"""Seconds :meth:`AsyncPools.close` waits for a pool that another thread's loop runs."""


async def _configure(conn: Any) -> None:
    """Set up each pooled async connection: pgvector types, rows as dicts."""
    from pgvector.psycopg import register_vector_async
    from psycopg.rows import dict_row

    await register_vector_async(conn)
    conn.row_factory = dict_row


class AsyncPools:
    """The async pools of one store, one per running event loop (opened on first use).

    Args:
        conninfo: the libpq URI or DSN.
        size: most connections of each pool.
        kwargs: the connections' arguments (as the sync pool's).
        timeout: seconds a call waits for a connection (then ``PoolTimeout``).
        reconnect: seconds a pool retries a failed connection on its own.
    """

    def __init__(
        self, conninfo: str, size: int, kwargs: dict[str, Any], timeout: float, reconnect: float
    ) -> None:
        self._args = (conninfo, size, kwargs, timeout, reconnect)
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        """Each loop's task that closes its pool at the loop's end (held: a loop keeps
        only weak references to its tasks)."""
        self._lock = threading.Lock()
        self.closed = False

    def _new(self) -> Any:
        from psycopg_pool import AsyncConnectionPool

        conninfo, size, kwargs, timeout, reconnect = self._args
        kwargs = {**kwargs, "autocommit": True}  # a batch begins its own transaction
        return AsyncConnectionPool(
            conninfo, **pool_options(size, kwargs, _configure, timeout, reconnect)
        )

    async def pool(self) -> Any:
        """This loop's pool (opened without waiting: a call waits for its connection)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            pool = self._pools.get(loop)
        if pool is not None:
            return pool
        if self.closed:
            raise RuntimeError("the store is closed")
        pool = self._new()
        await pool.open()
        with self._lock:
            kept = self._pools.setdefault(loop, pool)
        if kept is not pool:  # another task of this loop opened one meanwhile
            await pool.close()
        else:
            self._keepers[loop] = asyncio.ensure_future(_closed_at_the_loops_end(pool))
        return kept

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A connection of this loop's pool, returned to it afterwards."""
        pool = await self.pool()
        async with pool.connection() as conn:
            yield conn

    async def recheck(self) -> None:
        """Test this loop's idle connections, replacing those a restart broke.

        The pool does not test a connection on each checkout (the sync pool does): on
        the event loop that is one more statement per read batch. A batch that finds its
        connection broken calls this and runs again (reads are idempotent).
        """
        await (await self.pool()).check()

    async def aclose(self) -> None:
        """Close this loop's pool (the others stay open)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            pool = self._pools.pop(loop, None)
            keeper = self._keepers.pop(loop, None)
        if pool is not None:
            await pool.close()
        if keeper is not None:
            keeper.cancel()  # its work is done

    def close(self) -> None:
        """Close every pool: on its loop when that loop runs in another thread, on this
        thread when it is idle; a closed loop's pool has nothing left to close."""
        self.closed = True
        with self._lock:
            pools = list(self._pools.items())
            self._pools.clear()
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for loop, pool in pools:
            _close_on(loop, pool.close, here)


async def _closed_at_the_loops_end(pool: Any) -> None:
    """Close ``pool`` when its loop cancels its tasks on the way out (``asyncio.run``'s end).

    A cancellation that lands while the pool's worker makes a connection (its first, or
    one more as demand grows) is taken by psycopg's pool for a failed connection: the
    worker waits on for its next job and the loop's end waits for it forever. Closing
    the pool hands each worker its stop, so the loop ends. Closing a closed pool does
    nothing.
    """
    try:
        await asyncio.get_running_loop().create_future()  # until cancelled
    finally:
        await pool.close()


def _close_on(
    loop: asyncio.AbstractEventLoop,
    close: Callable[[], Any],
    here: asyncio.AbstractEventLoop | None,
) -> None:
    """Run the coroutine ``close()`` on ``loop`` as far as this thread can."""
    if loop.is_closed():
        return
    if loop is here:
        loop.create_task(close())  # this thread runs the loop: it closes once we return
    elif loop.is_running():
        done = asyncio.run_coroutine_threadsafe(close(), loop)
        try:
            done.result(CLOSE_TIMEOUT)
        except Exception:  # closing is best effort: the sockets die with the process
            done.cancel()
    else:
        loop.run_until_complete(close())
