"""What the SQL of every part of a store shares: its handler table's rows, the store.

Each part of a SQL store (the index, the transcript, the work queue, the facts) is a
:class:`SQLPart` with a table of its own, :attr:`SQLPart.HANDLERS`, from each op type it
runs to a :class:`Handler`: the method that runs the op inside the store's current
transaction, and what the op writes. The store runs a batch by looking each op up in
its parts' tables (:mod:`tiermem.stores.sql`).
"""

from __future__ import annotations

from typing import ClassVar, Literal, NamedTuple, Protocol

from tiermem.clock import Clock
from tiermem.stores.dialect import Dialect

Access = Literal["read", "access", "write"]
"""What an op writes: nothing, only access counts, or data."""


class Handler(NamedTuple):
    """The method of a part that runs an op, and what the op writes.

    ``plan``: the method takes the op alone and returns its plan (:mod:`.plans`), which
    a sync or an async connection runs; otherwise it takes the connection and the op.
    """

    method: str
    writes: Access
    plan: bool = False


class Host(Protocol):
    """The store a part's SQL runs in."""

    clock: Clock
    """Where lease and row times come from (the store's, which a test may replace)."""
    table: str
    """The memory index's table, ``memories_{dimension}``."""
    dimension: int


class SQLPart:
    """One part's SQL on one store: the engine's marks and locks, the store's clock."""

    HANDLERS: ClassVar[dict[type, Handler]] = {}
    """The ops this part runs, each with its method and what it writes."""

    def __init__(self, store: Host, dialect: Dialect) -> None:
        self.store = store
        self.dialect = dialect
        self.table = store.table
        self.p = dialect.mark
        self.claim_lock = dialect.claim_lock
        self.row_lock = dialect.row_lock
        self.user_filter = dialect.user_filter

    @property
    def clock(self) -> Clock:
        return self.store.clock
