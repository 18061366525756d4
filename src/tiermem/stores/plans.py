"""Plans: a store read written once, run on a sync or an async connection.

A plan is a generator (a stepped method's kind: :mod:`tiermem.aio.twins`) that yields the
statements an operation needs, one at a time, as ``(sql, params)``, receives each one's
rows (or, for a statement without rows, its row count) and returns the operation's
result. It holds no connection, so the same plan runs inside a sync transaction
(:func:`run`: SQLite, PostgreSQL's ``batch``) and inside an async one (:func:`arun`:
PostgreSQL's native ``abatch``): the library's one sync and one async driver
(:func:`~tiermem.aio.twins.drive`, :func:`~tiermem.aio.twins.adrive`) with a connection's
``execute``; the SQL and the shaping of rows exist once. A step may depend on the rows
before it (the vector search picks its plan by the user's row count), which a fixed list
of queries could not say. :class:`Lockstep` holds a batch's plans side by side, so their
statements go to the server a round at a time (:mod:`.postgres_rounds`).

An engine whose step needs more than a statement (SQLite's vector search reads its
in-process matrix under a lock) yields a callable instead, run with the sync connection;
such a plan is sync only (:func:`arun` refuses it).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias, TypeVar

from tiermem.aio.twins import adrive, drive

R = TypeVar("R")

Query: TypeAlias = tuple[str, Sequence[Any]]
"""One statement and its parameters."""


class Setting(NamedTuple):
    """A statement whose effect the plan's next step needs in the same transaction
    (``SET LOCAL``, ``set_config(..., true)``): a runner that ends a transaction between
    rounds (:mod:`.postgres_rounds`) keeps it open after a round that holds one."""

    sql: str
    params: Sequence[Any]


Step: TypeAlias = Query | Callable[[Any], Any]
"""A statement, or (sync only) a function of the open connection."""
Plan: TypeAlias = Generator[Step, Any, R]
"""Yields steps, receives each step's rows (or row count), returns the result."""


def run(c: Any, plan: Plan[R], **options: Any) -> R:
    """Run ``plan`` on the sync connection ``c`` (inside the caller's transaction);
    ``options`` go to each ``execute`` (PostgreSQL: ``binary=True``)."""

    def execute(step: Step) -> Any:
        if callable(step):
            return step(c)
        cursor = c.execute(*step, **options)
        return cursor.fetchall() if cursor.description is not None else cursor.rowcount

    return drive(plan, execute)


async def arun(c: Any, plan: Plan[R], **options: Any) -> R:
    """Run ``plan`` on the async connection ``c`` (inside the caller's transaction)."""

    async def execute(step: Step) -> Any:
        cursor = await c.execute(*_statement(step), **options)
        return await cursor.fetchall() if cursor.description is not None else cursor.rowcount

    return await adrive(plan, execute)


def _statement(step: Step) -> Query:
    """``step`` as a statement: a sync-only step cannot run on an async connection."""
    if callable(step):
        raise TypeError("a sync-only plan step cannot run on an async connection")
    return step


class Lockstep:
    """Several plans run side by side, a round at a time: :attr:`steps` holds the next
    statement of each plan not done yet (so a batch's statements can go to the server
    together), :meth:`send` hands a round's answers back to their plans, and
    :attr:`results` holds each plan's result once it is done."""

    def __init__(self, plans: Iterable[Plan[Any]]) -> None:
        self._plans = list(plans)
        self.results: list[Any] = [None] * len(self._plans)
        self.steps: dict[int, Query] = {}
        self.send(dict.fromkeys(range(len(self._plans))))  # send(None) starts a plan

    def send(self, answers: Mapping[int, Any]) -> None:
        """Each plan of ``answers`` its step's rows (or row count); then :attr:`steps`
        holds the next round."""
        self.steps = {}
        for i, answer in answers.items():
            plan = self._plans[i]
            try:
                step = plan.send(answer)
            except StopIteration as done:
                self.results[i] = done.value
                continue
            if callable(step):
                plan.close()
            self.steps[i] = _statement(step)


def sync_step(step: Callable[[Any], R]) -> Plan[R]:
    """A plan of one sync-only step (an engine method that takes the connection)."""
    return (yield step)  # type: ignore[no-any-return]


def first(rows: list[Any]) -> Any:
    """The first row of a step's rows, or None."""
    return rows[0] if rows else None
