"""Versioned schema: each engine keeps its migrations as an ordered list (simonw/llm style).

Every table has its own list: each ``memories_{dim}`` table (its engine's), and the
tables every dimension shares (the transcript's and the facts' modules give theirs). A
migration is a name and a function returning SQL statements for its table. :func:`pending`
tells which ones a table still needs; the engine runs them in one transaction and records
each name in ``tiermem_migrations`` under the table's name, so opening an old database
upgrades it and opening a current one costs one query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from tiermem.types.records import utcnow

MIGRATIONS_TABLE = "tiermem_migrations"


class Migration(NamedTuple):
    """One schema step: ``sql(table, dimension)`` returns the statements to run in order."""

    name: str
    sql: Callable[[str, int], list[str]]


def created(columns: str) -> Callable[[str, int], list[str]]:
    """A first step that creates its table, if missing, with ``columns`` (the SQL between
    the parentheses): the same on every engine."""
    return lambda table, dimension: [f"CREATE TABLE IF NOT EXISTS {table} ({columns})"]


def pending(migrations: list[Migration], applied: set[str]) -> list[Migration]:
    """The migrations not yet applied to a table, in order."""
    names = [m.name for m in migrations]
    if len(set(names)) != len(names):
        raise ValueError("migration names must be unique")
    return [m for m in migrations if m.name not in applied]


def migrate(c: Any, tables: Mapping[str, list[Migration]], dimension: int, mark: str) -> None:
    """Run on connection ``c`` (in its transaction) the migrations each table still needs,
    table by table in the order given.

    ``mark`` is the engine's parameter placeholder (``?`` or ``%s``); rows must be readable
    by column name (``sqlite3.Row``, psycopg's ``dict_row``).
    """
    c.execute(CREATE_MIGRATIONS_TABLE)
    applied: dict[str, set[str]] = {}
    for row in c.execute(f"SELECT table_name, name FROM {MIGRATIONS_TABLE}").fetchall():
        applied.setdefault(row["table_name"], set()).add(row["name"])
    for table, migrations in tables.items():
        for migration in pending(migrations, applied.get(table, set())):
            for statement in migration.sql(table, dimension):
                c.execute(statement)
            c.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} VALUES ({mark}, {mark}, {mark})",
                (table, migration.name, utcnow().isoformat()),
            )


CREATE_MIGRATIONS_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
    " table_name TEXT NOT NULL, name TEXT NOT NULL, applied_at TEXT NOT NULL,"
    " PRIMARY KEY (table_name, name))"
)
