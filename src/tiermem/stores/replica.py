"""Reads from a PostgreSQL streaming replica (``memory.persistent.read_connection_string``).

A batch whose ops only read (``sql.writes(op) == "read"``; a search that counts accesses
reads on the replica and counts them on the primary after) runs on the replica, the rest
on the primary. Reads stay read-your-writes, for every process and not only the writer's:

1. the primary's WAL position is read first (``pg_current_wal_lsn()``: one round trip,
   no table touched), which is at or past the commit of every write acknowledged so far;
2. the replica's transaction then checks ``pg_last_wal_replay_lsn()`` is at or past it,
   polling up to ``wait`` seconds while it is behind (the replica's last known position
   is remembered, so a replica that keeps up costs no extra query);
3. still behind after ``wait``: the batch reads the primary (counted as ``behind``).

A replica that cannot be reached is routed around: reads go to the primary, a warning
is logged once, and every ``retry`` seconds a read tries to connect again (a refused
connection fails at once); when it answers, reads go back to it. Reads that come while
such a probe (or the first one) runs go to the primary: none waits on a replica that
may hang.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from tiermem.stores.ops import Op, SearchOp
from tiermem.stores.pgsetup import pool_options
from tiermem.stores.records import ReplicaStatus
from tiermem.stores.sql import writes

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

DEFAULT_WAIT = 1.0
"""Seconds a read waits for the replica to replay the primary's last commit."""
DEFAULT_RETRY = 5.0
"""Seconds between attempts to reach a replica that stopped answering."""


def lsn(text: str) -> int:
    """A ``pg_lsn`` (``'16/B374D848'``) as a number."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def primary_lsn(c: psycopg.Connection[Any]) -> int:
    """The primary's WAL write position: past the commit of every acknowledged write."""
    row = c.execute("SELECT pg_current_wal_lsn()::text AS lsn").fetchone()
    assert row is not None
    return lsn(row[0] if isinstance(row, tuple) else row["lsn"])


def lag(primary: psycopg.Connection[Any], replica: psycopg.Connection[Any]) -> tuple[int, float]:
    """How far ``replica`` is behind ``primary``: bytes of WAL not replayed, and seconds
    since it replayed its last transaction when it is behind (0.0 when caught up)."""
    row = replica.execute(
        "SELECT pg_last_wal_replay_lsn()::text, coalesce(extract(epoch FROM"
        " now() - pg_last_xact_replay_timestamp()), 0)::float8"
    ).fetchone()
    assert row is not None
    values = list(row.values()) if isinstance(row, dict) else list(row)
    if values[0] is None:
        raise ValueError("this server is not a standby (pg_last_wal_replay_lsn() is NULL)")
    behind = max(0, primary_lsn(primary) - lsn(values[0]))
    return behind, float(values[1]) if behind else 0.0


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the replica cannot be reached (no connection, lost, shutting
    down), rather than that one query failed (e.g. cancelled by a conflict with replay)."""
    import psycopg

    if not isinstance(exc, psycopg.Error):
        return True  # the pool's timeout
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def replica_reads(ops: Sequence[Op]) -> list[Op] | None:
    """``ops`` as a replica runs them (a search that counts accesses without counting
    them), or None if one writes."""
    out: list[Op] = []
    for op in ops:
        if type(op) is SearchOp and op.count_access:
            out.append(op._replace(count_access=False))
        elif writes(op) == "read":
            out.append(op)
        else:
            return None
    return out


class Replica:
    """The replica's connection pool and what this process knows of it (see the module)."""

    def __init__(
        self,
        connection_string: str,
        *,
        pool_size: int,
        timeout: float,
        wait: float = DEFAULT_WAIT,
        retry: float = DEFAULT_RETRY,
        configure: Callable[[psycopg.Connection[Any]], None],
        connect_args: dict[str, Any],
    ) -> None:
        import psycopg_pool

        self.connection_string = connection_string
        self.wait = wait
        self.retry = retry
        self._connect_args = connect_args
        self._lock = threading.Lock()
        self._up = False
        self._retry_at = 0.0  # the first read tries it
        self._replayed = 0  # the highest replay position seen
        self._lost_at: float | None = None
        self._counts = {"reads": 0, "behind": 0, "down": 0}
        self._pool = psycopg_pool.ConnectionPool(
            connection_string,
            check=psycopg_pool.ConnectionPool.check_connection,
            **pool_options(pool_size, connect_args, configure, min(timeout, 1.0), 1.0),
        )
        self._pool.open(wait=False)  # a replica that is down does not stop the store

    def close(self) -> None:
        self._pool.close()

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def usable(self) -> bool:
        """Whether reads go to the replica now (a down one is probed every ``retry`` s)."""
        with self._lock:
            if self._up:
                return True
            if time.monotonic() < self._retry_at:
                return False
            self._retry_at = time.monotonic() + self.retry
        import psycopg

        try:  # outside the pool: a refused connection fails at once, without waiting
            psycopg.connect(self.connection_string, **self._connect_args).close()
        except psycopg.Error:
            return False
        with self._lock:
            self._up, lost = True, self._lost_at is not None
        if lost:
            log.warning("read replica is back: reads go to it again")
        return True

    def _lost(self, exc: BaseException) -> None:
        with self._lock:
            was_up, self._up = self._up, False
            self._retry_at = time.monotonic() + self.retry
            self._lost_at = time.monotonic()
        if was_up:
            log.warning(
                "read replica unavailable (%s): reads go to the primary; retrying every %.0f s",
                exc,
                self.retry,
            )

    @contextmanager
    def _caught_up(self, needed: int) -> Iterator[psycopg.Connection[Any] | None]:
        """A transaction on the replica once it replayed up to ``needed``, or None."""
        with self._pool.connection() as conn, conn.transaction():
            deadline = time.monotonic() + self.wait
            pause = 0.001
            while needed > self._replayed:
                row = conn.execute("SELECT pg_last_wal_replay_lsn()::text AS lsn").fetchone()
                replayed = lsn(row["lsn"]) if row and row["lsn"] else 0
                with self._lock:
                    self._replayed = max(self._replayed, replayed)
                if needed <= replayed:
                    break
                if time.monotonic() >= deadline:
                    yield None
                    return
                time.sleep(pause)
                pause = min(pause * 2, 0.02)
            yield conn

    def run(
        self,
        ops: Sequence[Op],
        run_all: Callable[[Any, Sequence[Op]], list[Any]],
        needed: Callable[[], int],
    ) -> list[Any] | None:
        """``run_all(conn, ops)`` on the replica once it replayed ``needed()``; None when
        the primary must answer instead (the replica is down, behind, or failed)."""
        import psycopg
        import psycopg_pool

        if not self.usable():
            self._count("down")
            return None
        position = needed()
        try:
            with self._caught_up(position) as conn:
                if conn is None:
                    self._count("behind")
                    return None
                results = run_all(conn, ops)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            if _unreachable(exc):
                self._lost(exc)
            else:
                log.warning("read replica failed a read (%s): the primary answers", exc)
            self._count("down")
            return None
        self._count("reads")
        return results

    def status(
        self, primary: Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
    ) -> ReplicaStatus:
        """The replica's state and lag (read from both servers now)."""
        lag_bytes: int | None = None
        lag_seconds: float | None = None
        import psycopg
        import psycopg_pool

        up = self.usable()
        if up:
            try:
                with self._pool.connection() as conn, primary() as main:
                    lag_bytes, lag_seconds = lag(main, conn)
            except (psycopg.Error, psycopg_pool.PoolTimeout, ValueError) as exc:
                self._lost(exc)
                up = False
        with self._lock:
            counts = dict(self._counts)
        return ReplicaStatus(up, lag_bytes, lag_seconds, **counts)
