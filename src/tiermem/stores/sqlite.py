"""SQLiteStore: the embedded long-term store (one file, WAL, FTS5, exact in-process vectors).

Vectors live in the file as float32 blobs; vector search multiplies the user's cached
matrix by the query (see :mod:`tiermem.stores.vector_cache` for why not sqlite-vec and
how several processes stay in sync). Keywords use an FTS5 index kept by triggers.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

import tiermem.stores.copies as copies
import tiermem.stores.facts as facts
import tiermem.stores.keyword_tokens as keyword_tokens
import tiermem.stores.ops as ops
import tiermem.stores.schema as schema
import tiermem.stores.transcript as transcript
from tiermem.errors import StoreError, StoreUnavailableError
from tiermem.paths import default_sqlite_path as default_path
from tiermem.paths import sqlite_file
from tiermem.stores.dialect import (
    Clause,
    Dialect,
    filter_clause,
    insert_sql,
    read_record,
    record_values,
    update_sets,
)
from tiermem.stores.index_sql import IndexSQL
from tiermem.stores.ops import Op, SearchOp, UpdateOp
from tiermem.stores.plans import Plan, sync_step
from tiermem.stores.row_cache import RowCache
from tiermem.stores.sql import SQLStore, writes
from tiermem.stores.sql_part import Host
from tiermem.stores.validate import check_durability
from tiermem.stores.vector_cache import VectorCache, load
from tiermem.text import keyword_terms
from tiermem.types.filters import NO_FILTER, MemoryFilter
from tiermem.types.records import MemoryRecord, SearchResult, StoreStats

if TYPE_CHECKING:
    from tiermem.embeddings.base import Embedder

_COLUMNS = (
    "seq, id, user_id, agent_id, session_id, content, content_hash, memory_type, importance,"
    " created_at, accessed_at, access_count, metadata, embedding"
)
# Statements naming rows by id or seq write ``+user_id``: the unary plus keeps SQLite from
# scanning the user's whole (user_id, ...) index instead of using the primary key (60 ms
# instead of 0.1 ms for a 50k-row user); the user condition still filters every row.

# SQLite allows 32766 parameters; keep IN (...) lists well below it.
_CHUNK = 500


def _v1(t: str, dim: int) -> list[str]:
    return [
        f"""CREATE TABLE {t} (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            user_id TEXT NOT NULL,
            agent_id TEXT,
            session_id TEXT,
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            memory_type TEXT NOT NULL,
            importance REAL NOT NULL,
            created_at REAL NOT NULL,
            accessed_at REAL NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{{}}',
            embedding BLOB NOT NULL CHECK (length(embedding) = {4 * dim}),
            vseq INTEGER NOT NULL,
            UNIQUE (user_id, content_hash))""",
        f"CREATE INDEX {t}_user_created ON {t} (user_id, created_at)",
        f"CREATE INDEX {t}_user_vseq ON {t} (user_id, vseq)",
        f"CREATE INDEX {t}_importance ON {t} (importance DESC)",
        f"""CREATE TABLE {t}_users (
            user_id TEXT PRIMARY KEY, vseq INTEGER NOT NULL, epoch INTEGER NOT NULL
        ) WITHOUT ROWID""",
        f"CREATE VIRTUAL TABLE {t}_fts USING fts5(content, content='{t}', content_rowid='seq')",
        f"""CREATE TRIGGER {t}_fts_insert AFTER INSERT ON {t} BEGIN
            INSERT INTO {t}_fts(rowid, content) VALUES (new.seq, new.content); END""",
        f"""CREATE TRIGGER {t}_fts_delete AFTER DELETE ON {t} BEGIN
            INSERT INTO {t}_fts({t}_fts, rowid, content)
            VALUES ('delete', old.seq, old.content); END""",
        f"""CREATE TRIGGER {t}_fts_update AFTER UPDATE OF content ON {t} BEGIN
            INSERT INTO {t}_fts({t}_fts, rowid, content) VALUES ('delete', old.seq, old.content);
            INSERT INTO {t}_fts(rowid, content) VALUES (new.seq, new.content); END""",
    ]


def _v2_stemmed_keywords(t: str, dim: int) -> list[str]:
    """Keyword search with Porter stemming: "painting" finds "paints" (measured on LoCoMo:
    keyword-only evidence recall 0.68 -> 0.73 within 2,000 tokens)."""
    return [
        f"DROP TABLE {t}_fts",
        f"CREATE VIRTUAL TABLE {t}_fts USING fts5(content, content='{t}', content_rowid='seq',"
        " tokenize='porter unicode61')",
        f"INSERT INTO {t}_fts({t}_fts) VALUES ('rebuild')",
    ]


def _v3_keywords_by_user(t: str, dim: int) -> list[str]:
    """Keyword search within the user's rows: the FTS index holds each row's owner as one
    token (``owner``, a virtual column) and a search matches it beside the terms, so FTS5
    walks the user's rows, not every user's matches (before: every match ranked, joined,
    then filtered: 40 ms for a 1k-message user in a 10k-message store, growing with the
    store; now 4.7 ms, ranked in the index before the best rows are read)."""
    fts = f"{t}_fts"

    def write(row: str, command: str = "") -> str:
        head = f"INSERT INTO {fts}({fts}, rowid, content, owner) VALUES ('delete', "
        if not command:
            head = f"INSERT INTO {fts}(rowid, content, owner) VALUES ("
        return f"{head}{row}.seq, {row}.content, {row}.owner);"

    return [
        f"ALTER TABLE {t} ADD COLUMN owner TEXT GENERATED ALWAYS AS ({OWNER_SQL}) VIRTUAL",
        *(f"DROP TRIGGER {t}_fts_{event}" for event in ("insert", "delete", "update")),
        f"DROP TABLE {fts}",
        f"CREATE VIRTUAL TABLE {fts} USING fts5(content, owner, content='{t}',"
        " content_rowid='seq', tokenize='porter unicode61')",
        f"CREATE TRIGGER {t}_fts_insert AFTER INSERT ON {t} BEGIN {write('new')} END",
        f"CREATE TRIGGER {t}_fts_delete AFTER DELETE ON {t} BEGIN {write('old', 'delete')} END",
        f"CREATE TRIGGER {t}_fts_update AFTER UPDATE OF content ON {t} BEGIN"
        f" {write('old', 'delete')} {write('new')} END",
        f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
    ]


def _v4_keywords_of_each_user(t: str, dim: int) -> list[str]:
    """Each user's postings of its own (:mod:`~tiermem.stores.keyword_tokens`): the index
    is rebuilt with a word's owner in each token, stemmed in Python. The ``owner`` column
    stays (dropping a column needs SQLite 3.35)."""
    fts = f"{t}_fts"

    def write(row: str, delete: bool = False) -> str:
        tokens = f"{keyword_tokens.SQL_FUNCTION}({row}.user_id, {row}.content)"
        if delete:  # a contentless index deletes a row given the very tokens it holds
            return (
                f"INSERT INTO {fts}({fts}, rowid, keywords) VALUES ('delete', {row}.seq, {tokens});"
            )
        return f"INSERT INTO {fts}(rowid, keywords) VALUES ({row}.seq, {tokens});"

    return [
        *(f"DROP TRIGGER {t}_fts_{event}" for event in ("insert", "delete", "update")),
        f"DROP TABLE {fts}",
        f"CREATE VIRTUAL TABLE {fts} USING fts5(keywords, content='', tokenize='unicode61')",
        f"INSERT INTO {fts}(rowid, keywords)"
        f" SELECT seq, {keyword_tokens.SQL_FUNCTION}(user_id, content) FROM {t}",
        f"CREATE TRIGGER {t}_fts_insert AFTER INSERT ON {t} BEGIN {write('new')} END",
        f"CREATE TRIGGER {t}_fts_delete AFTER DELETE ON {t} BEGIN {write('old', delete=True)} END",
        f"CREATE TRIGGER {t}_fts_update AFTER UPDATE OF user_id, content ON {t} BEGIN"
        f" {write('old', delete=True)} {write('new')} END",
    ]


def _v5_rows_by_type(t: str, dim: int) -> list[str]:
    """A user's rows of some types found in an index: every context searches among the
    user's standing instructions and preferences, and finding them read every row of the
    user (12 ms for a 3k-row user on loaded cores, growing with the user)."""
    return [f"CREATE INDEX {t}_user_type ON {t} (user_id, memory_type)"]


ROW_CACHE = 20_000
"""Decoded rows the store keeps (:class:`~tiermem.stores.row_cache.RowCache`): about
2 KB each with a 384-dimension vector."""
_DECODED = 20_000
"""Ids and metadata texts kept decoded: the same rows come back search after search."""

OWNER_SQL = "'u' || lower(hex(user_id))"
"""A row's owner as one FTS token (the user id's UTF-8 bytes in hex), as migration 003
indexed it."""


#: Schema history of a ``memories_{dim}`` table; append, never edit.
MIGRATIONS = [
    schema.Migration("001_create", _v1),
    schema.Migration("002_stemmed_keywords", _v2_stemmed_keywords),
    schema.Migration("003_keywords_by_user", _v3_keywords_by_user),
    schema.Migration("004_keywords_of_each_user", _v4_keywords_of_each_user),
    schema.Migration("005_rows_by_type", _v5_rows_by_type),
]
#: Schema histories of the tables every dimension shares.
SHARED = {
    **transcript.migrations("seq INTEGER PRIMARY KEY AUTOINCREMENT", ""),
    **facts.migrations(),
    **copies.migrations(),
}


def _ts(value: datetime) -> float:
    return value.timestamp()


def _dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, tz=timezone.utc)


@lru_cache(maxsize=_DECODED)
def _uuid(text: str) -> uuid.UUID:
    """A row's id (shared: a UUID is immutable)."""
    return uuid.UUID(text)


def _metadata(text: str) -> dict[str, Any]:
    """A row's metadata: a copy of the cached dict when it is flat (no list or dict
    inside, so the copy shares nothing mutable), else parsed afresh."""
    flat = _flat_metadata(text)
    return dict(flat) if flat is not None else cast(dict[str, Any], json.loads(text))


def _with_metadata(record: MemoryRecord, metadata: dict[str, Any]) -> MemoryRecord:
    """A copy of the cached ``record`` with its own ``metadata``: its fields copied as
    they are (``dataclasses.replace`` runs ``__init__`` again: 2.7 against 0.4 µs a row,
    400 rows a context)."""
    copy = object.__new__(MemoryRecord)
    copy.__dict__.update(record.__dict__, metadata=metadata)
    return copy


@lru_cache(maxsize=_DECODED)
def _flat_metadata(text: str) -> dict[str, Any] | None:
    value = json.loads(text)
    if not isinstance(value, dict) or any(isinstance(v, (dict, list)) for v in value.values()):
        return None
    return value


def _json_match(value: object) -> tuple[str, list[object]]:
    """SQL comparing a ``json_each`` row's value with a JSON scalar (as jsonb ``@>`` does)."""
    if value is None:
        return "type = 'null'", []
    if isinstance(value, bool):
        return "type = ?", ["true" if value else "false"]
    if isinstance(value, (int, float)):
        return "type IN ('integer', 'real') AND value = ?", [value]
    return "type = 'text' AND value = ?", [value]


def _has_metadata(column: str, metadata: Mapping[str, Any]) -> Clause:
    """Every key of ``metadata`` in the JSON ``column`` with its value."""
    sql, params = [], []
    for key, value in metadata.items():
        cond, extra = _json_match(value)
        sql.append(f"EXISTS (SELECT 1 FROM json_each({column}) WHERE key = ? AND {cond})")
        params.extend([key, *extra])
    return " AND ".join(sql), params


DIALECT = Dialect(
    mark="?",
    user_filter="+user_id",
    read_id=_uuid,
    read_real=float,
    read_time=_dt,
    read_json=_metadata,
    read_vector=lambda blob: np.frombuffer(blob, dtype=np.float32),
    write_id=str,
    write_time=_ts,
    write_vector=lambda vector: np.asarray(vector, dtype=np.float32).tobytes(),
    json_mark="?",
    one_of=lambda column, values: (f"{column} IN ({_marks(values)})", [*values]),
    has_metadata=_has_metadata,
    metadata_text=lambda column, key: f"json_extract({column}, '$.{key}')",
)
"""How SQLite keeps a memory's columns: ids as text, times as epoch seconds, JSON as
text, vectors as float32 bytes."""


def _record(row: sqlite3.Row) -> MemoryRecord:
    return read_record(row, DIALECT)


def _where(user_id: str, flt: MemoryFilter, alias: str = "") -> Clause:
    return filter_clause(user_id, flt, DIALECT, alias)


def _marks(items: Sized) -> str:
    """``?, ?, ...`` for an ``IN (...)`` list of ``items``."""
    return ",".join("?" * len(items))


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SQLiteIndex(IndexSQL[sqlite3.Connection]):
    """The memory index's SQL on SQLite, with the caches it reads through: each user's
    vectors (:class:`~.vector_cache.VectorCache`, ``cache_bytes``) and decoded rows."""

    columns = _COLUMNS
    page_order = "seq"

    def __init__(self, store: Host, cache_bytes: int) -> None:
        super().__init__(store, DIALECT)
        self.dimension = store.dimension
        self._cache = VectorCache(cache_bytes)
        self._rows = RowCache(ROW_CACHE)
        self._vocab = False  # the temp fts5vocab table :meth:`_choosing` reads is made

    def clear(self) -> None:
        """Drop the cached vectors and rows (the store closes)."""
        self._cache.clear()
        self._rows.clear()

    def rolled_back(self) -> None:
        """A transaction rolled back: the rows it gave new access counts are read anew."""
        self._rows.clear()

    # -- writes --

    def _bump(self, c: sqlite3.Connection, user_id: str, vectors: bool) -> int:
        """Advance the user's ``vseq`` (new vectors) or ``epoch`` (deletions); returns vseq."""
        column = "vseq" if vectors else "epoch"
        row = c.execute(
            f"INSERT INTO {self.table}_users (user_id, vseq, epoch) VALUES (?, 1, 0)"
            f" ON CONFLICT (user_id) DO UPDATE SET {column} = {column} + 1 RETURNING vseq",
            (user_id,),
        ).fetchone()
        return int(row[0])

    def existing_hashes(
        self, c: sqlite3.Connection, user_id: str, hashes: list[str]
    ) -> dict[str, uuid.UUID]:
        found: dict[str, uuid.UUID] = {}
        for part in _chunks(hashes):
            sql = (
                f"SELECT content_hash, id FROM {self.table} WHERE user_id = ?"
                f" AND content_hash IN ({_marks(part)})"
            )
            found.update((h, uuid.UUID(i)) for h, i in c.execute(sql, [user_id, *part]))
        return found

    def _insert(self, c: sqlite3.Connection, user_id: str, records: Sequence[MemoryRecord]) -> None:
        vseq = self._bump(c, user_id, vectors=True)
        c.executemany(
            insert_sql(self.table, DIALECT, ("vseq",)),
            [(*record_values(r, DIALECT), vseq) for r in records],
        )

    def write_update(self, c: sqlite3.Connection, op: UpdateOp, digest: str | None) -> None:
        sets, params = update_sets(op, digest, DIALECT)
        if op.embedding is not None:  # the user's vectors changed: the cache reloads them
            sets += ", vseq = ?"
            params.append(self._bump(c, op.user_id, vectors=True))
        if sets:
            c.execute(
                f"UPDATE {self.table} SET {sets} WHERE +user_id = ? AND id = ?",
                [*params, op.user_id, str(op.id)],
            )

    def delete_rows(
        self, c: sqlite3.Connection, user_id: str, ids: Sequence[uuid.UUID] | None
    ) -> int:
        if ids is None:
            deleted = c.execute(f"DELETE FROM {self.table} WHERE user_id = ?", (user_id,)).rowcount
        else:
            deleted = 0
            for part in _chunks([str(i) for i in ids]):
                deleted += c.execute(
                    f"DELETE FROM {self.table} WHERE +user_id = ? AND id IN ({_marks(part)})",
                    [user_id, *part],
                ).rowcount
        if deleted:
            self._bump(c, user_id, vectors=False)
        return int(deleted)

    # -- reads --

    def _by_ids_plan(self, user_id: str, ids: Sequence[uuid.UUID]) -> Plan[list[MemoryRecord]]:
        order = {str(i): n for n, i in enumerate(ids)}
        rows: list[sqlite3.Row] = []
        for part in _chunks(list(order)):
            sql = (
                f"SELECT {_COLUMNS} FROM {self.table} WHERE +user_id = ? AND id IN ({_marks(part)})"
            )
            rows.extend((yield (sql, [user_id, *part])))
        rows.sort(key=lambda r: order[r["id"]])
        return [_record(r) for r in rows]

    def _by_seqs(
        self, c: sqlite3.Connection, user_id: str, seqs: list[int], shared: bool = False
    ) -> dict[int, MemoryRecord]:
        """The user's records among rows ``seqs``: those read before at this version of
        the file from the row cache, the others read (in the transaction's snapshot:
        call after its first read). Each has its own metadata dict (a caller may change
        it) unless ``shared`` (:class:`~tiermem.stores.ops.SearchOp`): the cached record."""
        rows = self._rows
        rows.check(self._data_version(c))
        found: dict[int, MemoryRecord] = {}
        missing = []
        for seq in seqs:
            kept = rows.get(seq)
            if kept is None or kept[0].user_id != user_id:
                missing.append(seq)
            else:
                found[seq] = kept[0] if shared else _with_metadata(kept[0], _metadata(kept[1]))
        select = f"SELECT {_COLUMNS} FROM {self.table} WHERE +user_id = ? AND seq IN"
        for part in _chunks(missing):
            for r in c.execute(f"{select} ({_marks(part)})", [user_id, *part]):
                record, metadata = _record(r), r["metadata"]
                rows.put(r["seq"], (record, metadata))
                found[r["seq"]] = record if shared else _with_metadata(record, _metadata(metadata))
        return found

    def _existing_ids(self, c: sqlite3.Connection, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        found: set[uuid.UUID] = set()
        for part in _chunks([str(i) for i in ids]):
            sql = f"SELECT id FROM {self.table} WHERE id IN ({_marks(part)})"
            found.update(uuid.UUID(r[0]) for r in c.execute(sql, part))
        return found

    def _table_size(self, c: sqlite3.Connection) -> int:
        return int(c.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def _count_access_plan(
        self, user_id: str, ids: Sequence[uuid.UUID], now: datetime, times: int = 1
    ) -> Plan[int]:
        return (yield from sync_step(lambda c: self._count_access(c, user_id, ids, now, times)))

    def _count_access(
        self,
        c: sqlite3.Connection,
        user_id: str,
        ids: Sequence[uuid.UUID],
        now: datetime,
        times: int = 1,
    ) -> int:
        """Add ``times`` to the access count of the user's records ``ids``; how many there
        were. The row cache stays valid, its rows counted given their new counts in place
        (the planner's accesses, written every second, emptied it: on ten 100K-token
        users a context read and decoded 60 of its rows again)."""
        before = self._data_version(c)
        changed: list[Any] = []
        for part in _chunks([str(i) for i in ids]):
            changed += c.execute(
                f"UPDATE {self.table} SET access_count = access_count + ?, accessed_at = ?"
                f" WHERE +user_id = ? AND id IN ({_marks(part)}) RETURNING seq, access_count",
                [times, _ts(now), user_id, *part],
            ).fetchall()
        if self._rows.restamp(before, self._data_version(c)):
            for seq, count in changed:
                kept = self._rows.peek(seq)
                if kept is not None:  # the cache's own object, which searches share
                    object.__setattr__(kept[0], "access_count", count)
                    object.__setattr__(kept[0], "accessed_at", now)
        return len(changed)

    @staticmethod
    def _data_version(c: sqlite3.Connection) -> tuple[int, int]:
        """What the row cache's rows are valid for: the file's version (another
        connection's commits) and this connection's own changes."""
        return (c.execute("PRAGMA data_version").fetchone()[0], c.total_changes)

    def _vectors(self, c: sqlite3.Connection, user_id: str) -> Any:
        """The user's cached matrix, brought up to date with the transaction's snapshot."""
        state = c.execute(
            f"SELECT vseq, epoch FROM {self.table}_users WHERE user_id = ?", (user_id,)
        ).fetchone()
        if state is None:
            return None
        vseq, epoch = int(state[0]), int(state[1])
        with self._cache.lock:
            entry = self._cache.get(user_id)
            if entry is None or entry.epoch != epoch or entry.vseq > vseq:
                sql = f"SELECT seq, embedding FROM {self.table} WHERE user_id = ? ORDER BY seq"
                entry = load(c.execute(sql, (user_id,)).fetchall(), self.dimension, vseq, epoch)
                self._cache.put(user_id, entry)
            elif entry.vseq < vseq:
                sql = (
                    f"SELECT seq, embedding FROM {self.table}"
                    " WHERE user_id = ? AND vseq > ? ORDER BY seq"
                )
                entry.apply(c.execute(sql, (user_id, entry.vseq)).fetchall(), vseq)
                self._cache.put(user_id, entry)
            return entry

    def _vector_plan(self, op: SearchOp, limit: int) -> Plan[list[SearchResult]]:
        """The user's cached matrix times the query: a sync step (it holds the cache's lock)."""
        return (yield from sync_step(lambda c: self._vector_hits(c, op, limit)))

    def _vector_hits(self, c: sqlite3.Connection, op: SearchOp, limit: int) -> list[SearchResult]:
        with self._cache.lock:
            entry = self._vectors(c, op.user_id)
            if entry is None:
                return []
            subset = None
            if op.filter != MemoryFilter():
                where, params = _where(op.user_id, op.filter)
                seqs = np.array(
                    [
                        r[0]
                        for r in c.execute(
                            f"SELECT seq FROM {self.table} WHERE {where} ORDER BY seq", params
                        )
                    ],
                    dtype=np.int64,
                )
                subset = entry.positions(seqs)
            best = entry.top_k(cast(np.ndarray, op.vector), limit, subset)
        if not best:
            return []
        records = self._by_seqs(c, op.user_id, [s for s, _ in best], op.shared)
        return [SearchResult(records[s], score) for s, score in best if s in records]

    def _keyword_plan(self, op: SearchOp, limit: int) -> Plan[list[SearchResult]]:
        chosen = keyword_tokens.phrases(op.user_id, keyword_terms(op.text or ""))
        if not chosen:
            return []
        match = keyword_tokens.match(chosen)
        ranked = f"SELECT rowid, bm25({self.table}_fts) AS rank FROM {self.table}_fts"
        if op.filter == NO_FILTER:  # rank in the index, then read only the best rows
            match = yield from sync_step(lambda c: self._choosing(c, op.user_id, chosen))
            newest = (  # the newest KEYWORD_SCAN matches, ranked: bm25 per match is the cost
                f"SELECT rowid, rank FROM ({ranked} WHERE {self.table}_fts MATCH ?"
                " ORDER BY rowid DESC LIMIT ?)"
            )
            best = yield (f"{newest} ORDER BY rank LIMIT ?", [match, ops.KEYWORD_SCAN, limit])
            seqs = [r[0] for r in best]
            found = yield from sync_step(lambda c: self._by_seqs(c, op.user_id, seqs, op.shared))
            return [SearchResult(found[r[0]], -float(r[1])) for r in best if r[0] in found]
        where, params = _where(op.user_id, op.filter, alias="m")
        columns = ", ".join(f"m.{col.strip()}" for col in _COLUMNS.split(","))
        sql = (
            f"SELECT {columns}, r.rank FROM ({ranked} WHERE {self.table}_fts MATCH ?) AS r"
            f" JOIN {self.table} AS m ON m.seq = r.rowid WHERE {where}"
            " ORDER BY r.rank LIMIT ?"
        )
        rows = yield (sql, [match, *params, limit])
        return [SearchResult(_record(r), -float(r["rank"])) for r in rows]

    def _choosing(self, c: sqlite3.Connection, user_id: str, chosen: list[str]) -> str:
        """The FTS5 query of the ``chosen`` phrases that chooses the rows to rank: all of
        them, or the rarest (:func:`~tiermem.stores.keyword_tokens.rarest`) when all
        match more than ``KEYWORD_SCAN`` rows. Each token's rows come from an
        ``fts5vocab`` table this connection keeps in its temp schema; only when they add
        up to more are the matches counted. A user with at most half as many vectors
        cached (room left for rows not yet embedded) is matched by all without a look."""
        everything = keyword_tokens.match(chosen)
        with self._cache.lock:
            known = self._cache.get(user_id)
        if known is not None and known.size <= ops.KEYWORD_SCAN // 2:
            return everything
        fts, vocab = f"{self.table}_fts", f"temp.{self.table}_vocab"
        if not self._vocab:
            c.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING fts5vocab(main, {fts}, row)"
            )
            self._vocab = True
        tokens = list(dict.fromkeys(t for phrase in chosen for t in phrase.split()))
        sql = f"SELECT term, doc FROM {vocab} WHERE term IN ({_marks(tokens)})"
        counts = keyword_tokens.rows_of(chosen, dict(c.execute(sql, tokens).fetchall()))
        if sum(counts) <= ops.KEYWORD_SCAN:
            return everything
        sql = f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?"
        if c.execute(sql, (everything,)).fetchone()[0] <= ops.KEYWORD_SCAN:
            return everything
        return keyword_tokens.match(keyword_tokens.rarest(chosen, counts, ops.KEYWORD_SCAN))

    def _stats(self, c: sqlite3.Connection, user_id: str) -> StoreStats:
        row = c.execute(
            f"SELECT count(*), min(created_at), max(created_at), coalesce(sum(access_count), 0),"
            f" avg(importance) FROM {self.table} WHERE user_id = ?",
            (user_id,),
        ).fetchone()
        by_type = c.execute(
            f"SELECT memory_type, count(*) FROM {self.table}"
            " WHERE user_id = ? GROUP BY memory_type",
            (user_id,),
        ).fetchall()
        return StoreStats(
            count=row[0],
            by_type={t: n for t, n in by_type},
            oldest=None if row[1] is None else _dt(row[1]),
            newest=None if row[2] is None else _dt(row[2]),
            total_access_count=row[3],
            mean_importance=row[4],
        )


class SQLiteStore(SQLStore[sqlite3.Connection]):
    """Long-term memory in one SQLite file.

    Args:
        path: database file; ``None`` for :func:`default_path`, ``":memory:"`` for a
            private in-memory database.
        dimension: vector width (table ``memories_{dimension}``); defaults to the embedder's.
        embedder: embeds content and queries given without vectors.
        timeout: seconds to wait for another writer before :class:`StoreUnavailableError`.
        cache_bytes: memory for cached per-user vector matrices (least recently used go first).
        durability: ``"committed"`` (a commit is in the WAL file: it survives the death of
            the process, not a power loss; ``"async_commit"`` is the same here: the engine
            runs in the process) or ``"synced"`` (every commit is fsynced: it survives a
            power loss too).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        dimension: int | None = None,
        embedder: Embedder | None = None,
        timeout: float = 10.0,
        cache_bytes: int = 512 * 1024 * 1024,
        durability: str = "committed",
    ) -> None:
        super().__init__(dimension, embedder)
        synchronous = check_durability(durability)
        self.path = sqlite_file(path if path is not None else default_path())
        self._lock = threading.RLock()
        self._sqlite = SQLiteIndex(self, cache_bytes)
        self._hold(self._sqlite)
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.row_factory = sqlite3.Row
            self._conn.create_function(
                keyword_tokens.SQL_FUNCTION, 2, keyword_tokens.document, deterministic=True
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
        except sqlite3.Error as exc:
            raise StoreUnavailableError(
                f"cannot open SQLite database {self.path!r}: {exc}"
            ) from exc
        with self._transaction(write=True):
            schema.migrate(self._conn, {**SHARED, self.table: MIGRATIONS}, self.dimension, "?")

    # -- plumbing --

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._sqlite.clear()

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction; any error rolls it back and surfaces as a StoreError."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.ProgrammingError as exc:
                raise StoreUnavailableError(f"the store is closed: {exc}") from exc
            except sqlite3.OperationalError as exc:
                raise StoreUnavailableError(
                    f"SQLite database {self.path!r} unavailable: {exc}"
                ) from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                    self._sqlite.rolled_back()
                if isinstance(exc, sqlite3.OperationalError):
                    raise StoreUnavailableError(f"SQLite operation failed: {exc}") from exc
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"SQLite operation failed: {exc}") from exc
                raise

    def batch(self, ops: Iterable[Op]) -> list[Any]:
        ops = list(ops)
        write = any(writes(op) != "read" for op in ops)
        with self._transaction(write) as conn:
            return self._run_all(conn, ops)
