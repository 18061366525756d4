"""Versioned schema: each engine keeps its migrations as an ordered list (simonw/llm style).

A migration is a name and a function returning SQL statements for one ``memories_{dim}``
table. :func:`pending` tells which ones a table still needs; the engine runs them in one
transaction and records each name in ``tiermem_migrations``, so opening an old database
upgrades it and opening a current one costs one query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from tiermem.stores.records import utcnow

MIGRATIONS_TABLE = "tiermem_migrations"


class Migration(NamedTuple):
    """One schema step: ``sql(table, dimension)`` returns the statements to run in order."""

    name: str
    sql: Callable[[str, int], list[str]]


def pending(migrations: list[Migration], applied: set[str]) -> list[Migration]:
    """The migrations not yet applied to a table, in order."""
    names = [m.name for m in migrations]
    if len(set(names)) != len(names):
        raise ValueError("migration names must be unique")
    return [m for m in migrations if m.name not in applied]


def migrate(c: Any, table: str, dimension: int, migrations: list[Migration], mark: str) -> None:
    """Run on connection ``c`` (in its transaction) the migrations ``table`` still needs.

    ``mark`` is the engine's parameter placeholder (``?`` or ``%s``); rows must be readable
    by column name (``sqlite3.Row``, psycopg's ``dict_row``).
    """
    c.execute(CREATE_MIGRATIONS_TABLE)
    rows = c.execute(
        f"SELECT name FROM {MIGRATIONS_TABLE} WHERE table_name = {mark}", (table,)
    ).fetchall()
    for migration in pending(migrations, {r["name"] for r in rows}):
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
