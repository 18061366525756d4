"""Re-embed a ``memories_{from_dim}`` table into ``memories_{to_dim}`` with another model.

Seed 001's migration script as a function (``tiermem migrate-embeddings`` calls it with
the same flags). Records keep their ids, users, times, access counts and metadata; only
the vector changes. Each batch commits on its own and already-copied ids are skipped
without re-embedding, so an interrupted run resumes where it stopped and a finished run
repeated changes nothing. The source table is never modified.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from tiermem.errors import InputError, StoreUnavailableError
from tiermem.stores.ops import ExistingIdsOp, ImportOp, ScanOp, TableSizeOp
from tiermem.stores.pgsetup import import_driver
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.validate import check_vector
from tiermem.types.checks import check_limit
from tiermem.types.records import MemoryRecord

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder


@dataclass(frozen=True)
class MigrationReport:
    """What a migration run did.

    ``migrated`` rows were written now, ``already_present`` had been copied before (same
    id), ``duplicates`` were skipped because the target already had that user's content.
    """

    source_rows: int
    migrated: int
    already_present: int
    duplicates: int


def open_store(
    connection_string: str,
    dimension: int,
    embedder: Embedder | None = None,
    partitions: int | None = None,
) -> MemoryStore:
    """PostgresStore for ``postgresql://`` / ``postgres://`` URIs (``partitions`` as it
    takes them: unset, an existing store's layout or the default for a new one), else
    SQLiteStore on a path (``sqlite:///path`` also accepted)."""
    if is_postgres(connection_string):
        from tiermem.stores.postgres import PostgresStore

        return PostgresStore(
            connection_string, dimension=dimension, embedder=embedder, partitions=partitions
        )
    if partitions is not None:
        raise InputError(
            "partitions", "is only used with PostgreSQL", "leave it unset for a SQLite file"
        )
    from tiermem.stores.sqlite import SQLiteStore

    path = connection_string.removeprefix("sqlite:///")
    if not path:
        raise InputError(
            "connection_string", "is empty", "give a PostgreSQL URI or a SQLite file path"
        )
    return SQLiteStore(path, dimension=dimension, embedder=embedder)


def is_postgres(connection_string: str) -> bool:
    """Whether a connection string names PostgreSQL (else it is a SQLite path)."""
    return connection_string.startswith(("postgresql://", "postgres://"))


def list_tables(connection_string: str) -> set[str] | None:
    """The tables of a database, read without writing (None: a SQLite file that does not
    exist yet), so a tool can look at a store before opening it, which would create tables.

    Raises:
        StoreUnavailableError: the database cannot be read.
    """
    if is_postgres(connection_string):
        psycopg, _ = import_driver()
        try:
            with psycopg.connect(connection_string, autocommit=True, connect_timeout=5) as conn:
                rows = conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = ANY(current_schemas(false))"
                ).fetchall()
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"cannot read PostgreSQL: {exc}") from exc
        return {r[0] for r in rows}
    path = Path(connection_string.removeprefix("sqlite:///"))
    if not path.is_file():
        return None
    try:
        with closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.Error as exc:
        raise StoreUnavailableError(f"cannot read SQLite file {str(path)!r}: {exc}") from exc
    return {r[0] for r in rows}


def index_dimensions(tables: set[str]) -> list[int]:
    """The dimensions of the ``memories_{dim}`` tables among ``tables``, ascending."""
    return sorted(int(m.group(1)) for t in tables if (m := re.fullmatch(r"memories_(\d+)", t)))


def migrate_embeddings(
    *,
    from_dim: int,
    to_dim: int,
    to_model: str,
    connection_string: str,
    batch_size: int = 256,
    embedder: Embedder | None = None,
    progress: bool = True,
) -> MigrationReport:
    """Copy every memory of ``memories_{from_dim}`` into ``memories_{to_dim}``, re-embedded.

    Args:
        from_dim: dimension of the source table.
        to_dim: dimension of the target table (and of ``to_model``).
        to_model: embedding model of the target, e.g. ``"local/all-MiniLM-L6-v2"``.
        connection_string: PostgreSQL URI or SQLite path holding both tables.
        batch_size: records read, embedded and committed together.
        embedder: an already built embedder for ``to_model`` (default: ``get_embedder(to_model)``).
        progress: show a rich progress bar.

    Raises:
        InputError: equal dimensions, a bad batch size, or a model of another dimension.
        StoreUnavailableError: the database cannot be reached; rerun to resume.
    """
    if from_dim == to_dim:
        raise InputError(
            "to_dim", f"equals from_dim ({from_dim})", "migrate into a table of another dimension"
        )
    check_limit(batch_size, "batch_size")
    if embedder is None:
        from tiermem.embeddings import get_embedder

        embedder = get_embedder(to_model)
    elif embedder.model_id != to_model:
        raise InputError("embedder", f"is {embedder.model_id!r}, not to_model {to_model!r}")
    source = open_store(connection_string, from_dim)
    target = open_store(connection_string, to_dim, embedder)
    try:
        return _copy(source, target, embedder, batch_size, progress)
    finally:
        source.close()
        target.close()


def _copy(
    source: MemoryStore, target: MemoryStore, embedder: Embedder, batch_size: int, progress: bool
) -> MigrationReport:
    from rich.progress import Progress

    total = cast(int, source.batch([TableSizeOp()])[0])
    seen = migrated = present = 0
    after = None
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"{source.table} -> {target.table}", total=total)
        while True:
            records = cast(list[MemoryRecord], source.batch([ScanOp(after, batch_size)])[0])
            if not records:
                break
            after = records[-1].id
            done = cast(
                set[uuid.UUID], target.batch([ExistingIdsOp(tuple(r.id for r in records))])[0]
            )
            todo = [r for r in records if r.id not in done]
            if todo:
                vectors = embedder.embed([r.content for r in todo])
                fresh = tuple(
                    replace(r, embedding=check_vector(v, target.dimension))
                    for r, v in zip(todo, vectors, strict=True)
                )
                migrated += cast(int, target.batch([ImportOp(fresh)])[0])
            present += len(records) - len(todo)
            seen += len(records)
            bar.advance(task, len(records))
    return MigrationReport(seen, migrated, present, seen - migrated - present)
