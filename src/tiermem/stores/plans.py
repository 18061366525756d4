"""Plans: a store read written once, run on a sync or an async connection.

A plan is a generator that yields the statements an operation needs, one at a time, as
``(sql, params)``, receives each one's rows (or, for a statement without rows, its row
count) and returns the operation's result. It holds no connection, so the same plan runs
inside a sync transaction (:func:`run`: SQLite, PostgreSQL's ``batch``) and inside an
async one (:func:`arun`: PostgreSQL's native ``abatch``) — the SQL and the shaping of
rows exist once. A step may depend on the rows before it (the vector search picks its
plan by the user's row count), which a fixed list of queries could not say.

An engine whose step needs more than a statement (SQLite's vector search reads its
in-process matrix under a lock) yields a callable instead, run with the sync connection;
such a plan is sync only (:func:`arun` refuses it).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias, TypeVar

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
    try:
        step = next(plan)
        while True:
            if callable(step):
                answer = step(c)
            else:
                cursor = c.execute(*step, **options)
                answer = cursor.fetchall() if cursor.description is not None else cursor.rowcount
            step = plan.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def arun(c: Any, plan: Plan[R], **options: Any) -> R:
    """Run ``plan`` on the async connection ``c`` (inside the caller's transaction)."""
    try:
        step = next(plan)
        while True:
            if callable(step):
                plan.close()
                raise TypeError("a sync-only plan step cannot run on an async connection")
            cursor = await c.execute(*step, **options)
            if cursor.description is not None:
                answer = await cursor.fetchall()
            else:
                answer = cursor.rowcount
            step = plan.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


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
                raise TypeError("a sync-only plan step cannot run on an async connection")
            self.steps[i] = step


def sync_step(step: Callable[[Any], R]) -> Plan[R]:
    """A plan of one sync-only step (an engine method that takes the connection)."""
    return (yield step)  # type: ignore[no-any-return]


def first(rows: list[Any]) -> Any:
    """The first row of a step's rows, or None."""
    return rows[0] if rows else None
