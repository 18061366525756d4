"""SQLStore: a store on a SQL engine, holding each part's SQL and running their ops.

Each part's SQL is a class of its own with its own handler table (:mod:`.sql_part`):
the index's (:class:`~.index_sql.IndexSQL`, the engine's), the transcript's
(:class:`~.transcript_sql.TranscriptSQL`, which also runs erasures: they span the
parts), the work queue's (:class:`~.queue_sql.QueueSQL`) and the facts'
(:class:`~.facts_sql.FactsSQL`). A batch runs in one transaction of the engine, each op
by the part whose table holds its type (:data:`HANDLERS`: every op a SQL store runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import Any, ClassVar, Generic, TypeVar, cast

import tiermem.stores.transcript as tr
from tiermem.errors import InputError
from tiermem.stores.facts_sql import FactsSQL
from tiermem.stores.index_sql import IndexSQL
from tiermem.stores.ops import Op, SearchOp
from tiermem.stores.plans import Plan, run
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.queue_sql import QueueSQL
from tiermem.stores.sql_part import Access, Handler, SQLPart
from tiermem.stores.transcript_sql import TranscriptSQL

C = TypeVar("C")
"""The engine's connection type."""

HANDLERS: dict[type, Handler] = {
    **IndexSQL.HANDLERS,
    **TranscriptSQL.HANDLERS,
    **QueueSQL.HANDLERS,
    **FactsSQL.HANDLERS,
}
"""Every operation a SQL store runs (its parts' tables): its method and what it writes."""


def writes(op: Op) -> Access:
    """What ``op`` writes (a search that counts no access writes nothing)."""
    if type(op) is SearchOp and not op.count_access:
        return "read"
    return handler(op).writes


def relaxed_commit(ops: Sequence[Op], durability: str) -> bool:
    """Whether a batch may commit without waiting for the WAL flush: it writes access
    counts and no data (a crash may forget the last few counts, never data). A batch that
    only reads has nothing to flush."""
    kinds = {writes(op) for op in ops}
    return durability != "async_commit" and "access" in kinds and "write" not in kinds


def handler(op: Op) -> Handler:
    """The handler of ``op``; an InputError for anything else."""
    found = HANDLERS.get(type(op))
    if found is None:
        raise InputError("op", f"{type(op).__name__} is not a store operation")
    return found


class SQLStore(MemoryStore, Generic[C]):
    """A :class:`MemoryStore` on a SQL engine; ``C`` is the engine's connection type.

    An engine builds its index's SQL and hands it to :meth:`_hold`, and implements
    :meth:`batch`: one transaction calling :meth:`_run_all`.
    """

    plan_options: ClassVar[dict[str, Any]] = {}
    """What the engine's ``execute`` takes for a plan's statements."""

    def _hold(self, index: IndexSQL[C], transcript: type[TranscriptSQL] = TranscriptSQL) -> None:
        """Hold the parts' SQL over ``index`` (``transcript``: the engine's transcript SQL)."""
        facts = FactsSQL(self, index)
        self._transcript_sql = transcript(self, index, facts)
        parts: list[SQLPart] = [index, self._transcript_sql, QueueSQL(self, index), facts]
        self._parts = {op: part for part in parts for op in part.HANDLERS}

    async def abatch(self, ops: Iterable[Op]) -> list[Any]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _run_all(self, c: C, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops`` in order inside the current transaction; consecutive appends go
        together (one round trip for a server's group commit)."""
        results: list[Any] = []
        for appends, same in groupby(ops, key=lambda op: type(op) is tr.AppendOp):
            group = list(same)
            if appends and len(group) > 1:
                results += self._transcript_sql.append_all(c, cast(list[tr.AppendOp], group))
            else:
                results += [self._run(c, op) for op in group]
        return results

    def _run(self, c: C, op: Op) -> Any:
        """Run one operation inside the current transaction (see :data:`HANDLERS`)."""
        found = handler(op)
        if found.plan:
            return run(c, self._plan(op), **self.plan_options)
        return getattr(self._parts[type(op)], found.method)(c, op)

    def _plan(self, op: Op) -> Plan[Any]:
        """The plan of a read ``op`` (its handler is a plan; see :mod:`.plans`)."""
        found = handler(op)
        if not found.plan:
            raise InputError("op", f"{type(op).__name__} has no plan")
        return cast(Plan[Any], getattr(self._parts[type(op)], found.method)(op))
