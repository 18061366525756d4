"""API keys and the users each tenant has, in two small tables of the store's database.

A key reads ``tm_<id>_<secret>``: ``id`` (12 hex digits) names the row, and only the
SHA-256 of ``secret`` is stored, so the table never holds a usable key and a leaked
table grants nothing. Every request looks its key up (one indexed read), so a revoked
key is refused at once by every worker sharing the database.

The same SQL runs on SQLite (a file next to, or the same as, the embedded store) and
PostgreSQL; it stays out of ``tiermem.stores`` because only the server needs it.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from tiermem.errors import InputError, MissingExtraError, StoreUnavailableError
from tiermem.extras import needs_extra
from tiermem.paths import sqlite_file
from tiermem.server.tenants import check_tenant

PREFIX = "tm_"
RECHECK_SECONDS = 1.0
ID_HEX = 12
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS tiermem_api_keys (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        secret_sha256 TEXT NOT NULL,
        name TEXT,
        created_at TEXT NOT NULL,
        revoked_at TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS tiermem_tenant_users (
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        first_seen TEXT NOT NULL,
        PRIMARY KEY (tenant, user_id)
    )""",
)


@dataclass(frozen=True)
class ApiKey:
    """A key's public part (never its secret)."""

    id: str
    tenant: str
    name: str | None
    created_at: str
    revoked_at: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "name": self.name,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def keys_location(config: Any, db: str | None = None) -> str:
    """Where a server's keys live: the store's own database (PostgreSQL, or the SQLite
    file ``db``, else the configured one), without opening the store."""
    persistent = config.memory.persistent
    if persistent.provider == "postgresql" and persistent.enabled:
        return str(persistent.connection_string.get_secret_value())
    if db:
        return str(db)
    return str(persistent.path) if persistent.enabled else ":memory:"


def split_key(token: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed key, else None."""
    if not token.startswith(PREFIX) or len(token) < len(PREFIX) + ID_HEX + 2:
        return None
    key_id, sep, secret = token[len(PREFIX) :].partition("_")
    if sep != "_" or len(key_id) != ID_HEX or not secret:
        return None
    return key_id, secret


class KeyStore:
    """Keys and tenant users in a SQLite file (or ``:memory:``) or a PostgreSQL database.

    Args:
        location: a ``postgresql://`` URL, or the path of a SQLite file.
    """

    def __init__(self, location: str) -> None:
        self.location = location
        self._postgres = location.startswith(("postgresql://", "postgres://"))
        self._lock = threading.Lock()
        self._seen: set[tuple[str, str]] = set()
        self._ever_keys = False
        self._recheck_at = 0.0
        self._conn: Any
        try:
            if self._postgres:
                with needs_extra("postgres", "memory.persistent.provider", "'postgresql'"):
                    from psycopg_pool import ConnectionPool
                self._conn = ConnectionPool(
                    location, min_size=1, max_size=8, kwargs={"autocommit": True}, open=True
                )
            else:
                location = sqlite_file(location, "db")
                self._conn = sqlite3.connect(
                    location, isolation_level=None, check_same_thread=False, timeout=30
                )
                if location != ":memory:":
                    self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=FULL")  # keys: synced to disk
        except (MissingExtraError, InputError):
            raise
        except Exception as exc:
            raise StoreUnavailableError(f"cannot open the key database: {exc}") from exc
        with self._cursor() as cur:
            for statement in SCHEMA:
                cur.execute(statement)

    @contextmanager
    def _cursor(self, synced: bool = True) -> Iterator[Any]:
        """A cursor; on SQLite, ``synced=False`` commits without waiting for the disk
        (``synchronous=NORMAL``: what the memory store's default durability does)."""
        try:
            if self._postgres:
                with self._conn.connection() as conn, conn.cursor() as cur:
                    yield cur
            elif synced:
                with self._lock:
                    yield self._conn.cursor()
            else:
                with self._lock:
                    self._conn.execute("PRAGMA synchronous=NORMAL")
                    try:
                        yield self._conn.cursor()
                    finally:
                        self._conn.execute("PRAGMA synchronous=FULL")
        except (sqlite3.OperationalError, OSError) as exc:
            raise StoreUnavailableError(f"key database unavailable: {exc}") from exc
        except Exception as exc:
            if type(exc).__module__.startswith(("psycopg", "psycopg_pool")):
                raise StoreUnavailableError(f"key database unavailable: {exc}") from exc
            raise

    def _run(
        self, sql: str, params: Sequence[Any] = (), synced: bool = True
    ) -> list[tuple[Any, ...]]:
        if self._postgres:
            sql = sql.replace("?", "%s")
        with self._cursor(synced) as cur:
            cur.execute(sql, tuple(params))
            return list(cur.fetchall()) if cur.description else []

    # -- keys --------------------------------------------------------------------------

    def create(self, tenant: str, name: str | None = None) -> tuple[ApiKey, str]:
        """A new key of ``tenant``: its public part and the key itself (shown once)."""
        check_tenant(tenant)
        if name is not None and (not isinstance(name, str) or len(name) > 200):
            raise InputError("name", "must be a string of at most 200 characters")
        key_id, secret = secrets.token_hex(ID_HEX // 2), secrets.token_urlsafe(32)
        key = ApiKey(key_id, tenant, name, _now())
        self._run(
            "INSERT INTO tiermem_api_keys (id, tenant, secret_sha256, name, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (key.id, tenant, _digest(secret), name, key.created_at),
        )
        self._ever_keys = True
        return key, f"{PREFIX}{key_id}_{secret}"

    def list(self, tenant: str | None = None) -> list[ApiKey]:
        """Every key (of ``tenant``), oldest first, revoked ones included."""
        sql = "SELECT id, tenant, name, created_at, revoked_at FROM tiermem_api_keys"
        rows = (
            self._run(sql + " WHERE tenant = ? ORDER BY created_at", (tenant,))
            if tenant is not None
            else self._run(sql + " ORDER BY created_at")
        )
        return [ApiKey(*row) for row in rows]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key now; False if there is no active key with this id."""
        rows = self._run(
            "UPDATE tiermem_api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"
            " RETURNING id",
            (_now(), key_id),
        )
        return bool(rows)

    def verify(self, token: str) -> ApiKey | None:
        """The active key ``token`` is, or None (malformed, unknown, wrong or revoked)."""
        parts = split_key(token)
        if parts is None:
            return None
        key_id, secret = parts
        rows = self._run(
            "SELECT id, tenant, name, created_at, revoked_at, secret_sha256"
            " FROM tiermem_api_keys WHERE id = ?",
            (key_id,),
        )
        if not rows or not hmac.compare_digest(rows[0][5], _digest(secret)):
            return None
        key = ApiKey(*rows[0][:5])
        return key if key.active else None

    def keys_exist(self) -> bool:
        """Whether any key was ever created (revoking every key does not reopen the server).

        A "no" is asked again after :data:`RECHECK_SECONDS`, so development mode ends
        within that time of a key made by another process (``tiermem keys create``).
        """
        if not self._ever_keys and time.monotonic() >= self._recheck_at:
            self._ever_keys = bool(self._run("SELECT 1 FROM tiermem_api_keys LIMIT 1"))
            self._recheck_at = time.monotonic() + RECHECK_SECONDS
        return self._ever_keys

    # -- users of each tenant (for listings) ---------------------------------------------

    def note_user(self, tenant: str, user_id: str) -> None:
        """Record that ``tenant`` has ``user_id`` (once per process and user). On SQLite
        the row is as durable as the user's messages (the store's default), not synced to
        disk as keys are: a new user's first write would wait for the disk (3-25 ms on
        the benchmark machine) in the thread that commits every request's messages."""
        if (tenant, user_id) in self._seen:
            return
        self._run(
            "INSERT INTO tiermem_tenant_users (tenant, user_id, first_seen) VALUES (?, ?, ?)"
            " ON CONFLICT (tenant, user_id) DO NOTHING",
            (tenant, user_id, _now()),
            synced=False,
        )
        self._seen.add((tenant, user_id))

    def users(self, tenant: str, limit: int = 1000, after: str = "") -> builtins.list[str]:
        """The tenant's users by id, ``limit`` of them after ``after``."""
        rows = self._run(
            "SELECT user_id FROM tiermem_tenant_users WHERE tenant = ? AND user_id > ?"
            " ORDER BY user_id LIMIT ?",
            (tenant, after, limit),
        )
        return [row[0] for row in rows]

    def forget_user(self, tenant: str, user_id: str) -> None:
        self._run(
            "DELETE FROM tiermem_tenant_users WHERE tenant = ? AND user_id = ?", (tenant, user_id)
        )
        self._seen.discard((tenant, user_id))

    # -- moving to another database (tiermem copy) ----------------------------------------

    def rows(self) -> dict[str, builtins.list[tuple[Any, ...]]]:
        """Every row of both tables as stored (hashed secrets included), in key order:
        what a copy of the store carries to another database."""
        return {
            "tiermem_api_keys": self._run(
                "SELECT id, tenant, secret_sha256, name, created_at, revoked_at"
                " FROM tiermem_api_keys ORDER BY id"
            ),
            "tiermem_tenant_users": self._run(
                "SELECT tenant, user_id, first_seen FROM tiermem_tenant_users"
                " ORDER BY tenant, user_id"
            ),
        }

    def add_rows(self, rows: dict[str, builtins.list[tuple[Any, ...]]]) -> int:
        """Insert rows of :meth:`rows` as they are; a key or tenant user already here is
        kept. How many rows were added."""
        added = 0
        for table, marks in (("tiermem_api_keys", 6), ("tiermem_tenant_users", 3)):
            for row in rows.get(table, []):
                found = self._run(
                    f"INSERT INTO {table} VALUES ({', '.join('?' * marks)})"
                    " ON CONFLICT DO NOTHING RETURNING 1",
                    row,
                )
                added += len(found)
        if added:
            self._ever_keys = True
        return added

    def close(self) -> None:
        self._conn.close()
