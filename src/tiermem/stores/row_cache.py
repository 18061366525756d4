"""Decoded rows of a SQLite store's memories table, kept while the file is unchanged.

A search reads the same rows prompt after prompt: reading and decoding the 200 records
of a vector search was most of its time. :class:`RowCache` keeps each row's record (with
its metadata's JSON text, decoded afresh for each caller) by ``seq`` for as long as the
database holds what they were read from: the store checks, in every read transaction, a
version made of SQLite's ``data_version`` (it changes when another connection, in this
process or another, commits) and the connection's ``total_changes`` (its own writes); any
change empties the cache. So a row is never served older than the transaction reading it,
in any process. One write of the store's own keeps the cache: a count of accesses
(:meth:`RowCache.restamp`), which a context writes every second and which changes no
field a search reads; the rows it counts get their new counts in place.

Callers hold the store's lock: the cache has none of its own.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class RowCache:
    """Decoded rows by ``seq`` (least recently used dropped beyond ``size``), valid for
    one ``version`` of the database."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._rows: OrderedDict[int, tuple[Any, ...]] = OrderedDict()
        self._version: object = None

    def check(self, version: object) -> None:
        """Forget every row unless the database is at the ``version`` they were read at."""
        if version != self._version:
            self._rows.clear()
            self._version = version

    def restamp(self, before: object, after: object) -> bool:
        """Call the rows read at ``before`` valid at ``after`` (a write that changed no
        field of theirs but the ones the caller patches): whether they were."""
        if self._version != before:
            return False
        self._version = after
        return True

    def peek(self, seq: int) -> tuple[Any, ...] | None:
        """The row ``seq`` if kept (its place in the order unchanged)."""
        return self._rows.get(seq)

    def get(self, seq: int) -> tuple[Any, ...] | None:
        fields = self._rows.get(seq)
        if fields is not None:
            self._rows.move_to_end(seq)
        return fields

    def put(self, seq: int, fields: tuple[Any, ...]) -> None:
        self._rows[seq] = fields
        if len(self._rows) > self.size:
            self._rows.popitem(last=False)

    def clear(self) -> None:
        self._rows.clear()
        self._version = None
