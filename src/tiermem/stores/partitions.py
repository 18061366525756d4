"""Hash partitioning by ``user_id`` on PostgreSQL (``memory.persistent.partitions``).

With ``partitions: N`` every table of a user's data (``memories_{dim}``, the transcript,
summaries, generations, fact marks and leases) is created ``PARTITION BY HASH (user_id)``
into N tables named ``{table}_p{i}``. The tables' migration histories stay the same:
:func:`partitioned` rewrites each table's first step (its ``CREATE TABLE``) only, so a
later step (``ALTER TABLE``, ``CREATE INDEX``) runs on the parent and reaches every
partition; indexes, HNSW's included, are per partition. Every key already leads with or
includes ``user_id`` (PostgreSQL requires it of a partitioned table's keys), except the
first ``memories_{dim}`` key on ``id``, which becomes ``(user_id, id)`` here as a later
step makes it anyway.

The count is fixed when the tables are created, and the catalog keeps it (each parent's
partitions): :func:`check_layout` refuses a store opened with another setting. With no
setting (``None``, the default) :func:`adopted` reads it from the catalog: an existing
store opens as it was made (unpartitioned stores from before this default included), a new
one is made with :data:`DEFAULT_PARTITIONS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from tiermem.errors import PartitionsMismatchError
from tiermem.stores.schema import Migration

MAX_PARTITIONS = 1024
"""The most partitions a store may be created with (each is a table with its indexes)."""

DEFAULT_PARTITIONS = 16
"""The partitions of a new store made with no setting: each user's HNSW graph and GIN
index is one sixteenth of the store's (docs/scaling.md: the measured curve)."""

_DIMENSION_TABLE = r"^memories_[0-9]+$"
"""Any dimension's ``memories_{dim}`` (a store's layout, whichever dimension opens it)."""

_CREATE = re.compile(
    r"CREATE TABLE (IF NOT EXISTS )?(\w+) \((.*?)\)(?: WITH \(([^()]*)\))?",
    re.DOTALL | re.IGNORECASE,
)
_KEY_COLUMN = re.compile(r"^(\s*)(\w+)( [^,\n]*?) PRIMARY KEY\b", re.IGNORECASE | re.MULTILINE)
"""A column declared the primary key on its own line (``id uuid PRIMARY KEY,``)."""


def partition_of(table: str, index: int) -> str:
    """The name of partition ``index`` of ``table``."""
    return f"{table}_p{index}"


def hash_partitioned(statement: str, partitions: int) -> list[str]:
    """``statement`` as it creates its table partitioned by ``user_id`` into
    ``partitions`` tables (storage options move to the partitions; a one-column primary
    key other than ``user_id`` gains it); any other statement as it is."""
    found = _CREATE.fullmatch(statement.strip())
    if found is None:
        return [statement]
    maybe, table, body, storage = found.groups()
    key = _KEY_COLUMN.search(body)
    if key is not None and key.group(2).lower() != "user_id":
        body = _KEY_COLUMN.sub(r"\1\2\3 NOT NULL", body, count=1)
        body = f"{body.rstrip()},\n            PRIMARY KEY (user_id, {key.group(2)})"
    maybe = maybe or ""
    with_ = f" WITH ({storage})" if storage else ""
    return [
        f"CREATE TABLE {maybe}{table} ({body}) PARTITION BY HASH (user_id)",
        *(
            f"CREATE TABLE {maybe}{partition_of(table, i)} PARTITION OF {table}"
            f" FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i}){with_}"
            for i in range(partitions)
        ),
    ]


def partitioned(
    histories: Mapping[str, list[Migration]], partitions: int
) -> dict[str, list[Migration]]:
    """The tables' histories with each first step creating its table hash-partitioned
    (``partitions`` 0: as they are)."""
    if not partitions:
        return dict(histories)

    def first(step: Callable[[str, int], list[str]]) -> Callable[[str, int], list[str]]:
        return lambda table, dim: [
            part for s in step(table, dim) for part in hash_partitioned(s, partitions)
        ]

    return {
        table: [m._replace(sql=first(m.sql)) if i == 0 else m for i, m in enumerate(steps)]
        for table, steps in histories.items()
    }


def layout(c: Any, tables: list[str], pattern: str = "$^") -> dict[str, int]:
    """How many partitions each existing table of ``tables``, or whose name matches the
    regular expression ``pattern`` (the default matches none), has (0: not partitioned);
    partitions themselves are not listed."""
    rows = c.execute(
        "SELECT c.relname AS name, c.relkind::text AS kind,"
        " (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid) AS n"
        " FROM pg_class c WHERE (c.relname = ANY(%s) OR c.relname ~ %s)"
        " AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        " AND c.relnamespace = current_schema()::regnamespace",
        (tables, pattern),
    ).fetchall()
    return {r["name"]: int(r["n"]) if r["kind"] == "p" else 0 for r in rows}


def store_layout(c: Any, tables: list[str]) -> dict[str, int]:
    """:func:`layout` of ``tables`` and of every dimension's ``memories_{dim}``: the
    store's layout, whichever dimension opens it (empty: a new store)."""
    return layout(c, tables, _DIMENSION_TABLE)


def adopted(c: Any, tables: list[str], partitions: int | None) -> int:
    """The count to open a store with: ``partitions`` if set; else the layout of the
    store's existing per-user tables (``tables`` and any dimension's); else, for a new
    store, :data:`DEFAULT_PARTITIONS`. Run it under the migration lock, so two processes
    making the same new store agree.

    Raises:
        PartitionsMismatchError: with no setting, the existing tables disagree.
    """
    if partitions is not None:
        return partitions
    found = store_layout(c, tables)
    counts = set(found.values())
    if len(counts) > 1:
        raise PartitionsMismatchError(
            "memory.persistent.partitions",
            "is not set, and the existing tables disagree: "
            + ", ".join(f"{t} {n}" for t, n in sorted(found.items())),
            "the store was made in parts with different settings: copy it into a new "
            "database with tiermem copy (docs/scaling.md)",
        )
    return counts.pop() if counts else DEFAULT_PARTITIONS


def check_layout(c: Any, tables: list[str], partitions: int) -> None:
    """Refuse tables partitioned otherwise than ``partitions`` says (the count is fixed
    at creation: a store opened with another setting would mix layouts)."""
    for table, found in sorted(layout(c, tables).items()):
        if found == partitions:
            continue
        have = f"hash-partitioned by user_id into {found}" if found else "not partitioned"
        raise PartitionsMismatchError(
            "memory.persistent.partitions",
            f"is {partitions}, but table {table} is {have}",
            f"open it with partitions: {found}, or leave partitions unset to adopt the "
            "store's layout; the count is fixed when the tables are created: to change it, "
            "copy the store into a new database with tiermem copy (docs/scaling.md)",
        )
