"""The memory index's SQL shared by SQLite and PostgreSQL (:class:`IndexSQL`).

Both engines run the index's operations with the same rules: content-hash deduplication
on add and import, the checks before an update, and search (vector, keyword, or both
fused) counting an access of every hit it returns. This class holds those rules and its
handler table; each engine implements the small methods that speak its SQL
(:class:`~tiermem.stores.sqlite.SQLiteIndex`, :class:`~tiermem.stores.postgres.PostgresIndex`).
The other parts' SQL writes index rows through it (:meth:`IndexSQL.add_rows`,
:meth:`IndexSQL.delete_rows`...), inside the same transaction.
"""

from __future__ import annotations

import json
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

import tiermem.stores.copies as copies
import tiermem.stores.transcript as tr
from tiermem.embeddings.cache import content_hash
from tiermem.errors import InputError, NotFoundError
from tiermem.stores.dialect import Clause, filter_clause, read_record
from tiermem.stores.ops import (
    AccessOp,
    AddOp,
    CountOp,
    ExistingIdsOp,
    GetOp,
    ImportOp,
    ListOp,
    ScanOp,
    SearchOp,
    StatsOp,
    TableSizeOp,
    UpdateOp,
)
from tiermem.stores.plans import Plan, run
from tiermem.stores.records import bump_access
from tiermem.stores.relevance import fuse
from tiermem.stores.sql_part import Handler, SQLPart
from tiermem.types.filters import MemoryFilter
from tiermem.types.records import MemoryRecord, SearchResult, StoreStats, utcnow

UNPROFILED = ("message", "tool")
"""Memory types no synopsis is written from (adding them leaves the generation as is)."""

C = TypeVar("C")
"""The engine's connection type."""


class IndexSQL(SQLPart, ABC, Generic[C]):
    """The memory index's ops on a SQL engine; ``C`` is the engine's connection type.

    An engine implements the abstract methods below; :meth:`lock_user` is a no-op unless
    writers of one user need serializing beyond the transaction.
    """

    HANDLERS: ClassVar[dict[type, Handler]] = {
        AddOp: Handler("_run_add", "write"),
        GetOp: Handler("_get_plan", "access", plan=True),
        SearchOp: Handler("_search_plan", "access", plan=True),
        AccessOp: Handler("_run_access", "access"),
        UpdateOp: Handler("_run_update", "write"),
        ListOp: Handler("_list_plan", "read", plan=True),
        CountOp: Handler("_count_plan", "read", plan=True),
        StatsOp: Handler("_run_stats", "read"),
        ScanOp: Handler("_scan_plan", "read", plan=True),
        ImportOp: Handler("_run_import", "write"),
        ExistingIdsOp: Handler("_run_existing_ids", "read"),
        TableSizeOp: Handler("_run_table_size", "read"),
        copies.CopyStateOp: Handler("_copy_state", "read"),
        copies.SaveCopyStateOp: Handler("_save_copy_state", "write"),
    }
    columns: ClassVar[str]
    """The memory table's columns a read selects (the engine's list)."""
    page_order: ClassVar[str] = "id"
    """What orders a page's memories created at the same instant (newest first)."""

    # -- the memory index's ops --

    def _run_add(self, c: C, op: AddOp) -> list[uuid.UUID]:
        if any(m.memory_type not in UNPROFILED for m in op.memories):
            self.changed(c, op.user_id)  # a profile memory: cached synopses are stale
        return self.add_rows(c, op)

    def _get_plan(self, op: GetOp) -> Plan[list[MemoryRecord]]:
        return (yield from self.touch_plan((yield from self._by_ids_plan(op.user_id, op.ids))))

    def _run_access(self, c: C, op: AccessOp) -> int:
        return self._count_access(c, op.user_id, op.ids, utcnow(), op.times)

    def _run_update(self, c: C, op: UpdateOp) -> MemoryRecord:
        self.changed(c, op.user_id)
        return self._update(c, op)

    def _run_stats(self, c: C, op: StatsOp) -> StoreStats:
        return self._stats(c, op.user_id)

    def _run_import(self, c: C, op: ImportOp) -> int:
        return self._import(c, op.records)

    def _run_existing_ids(self, c: C, op: ExistingIdsOp) -> set[uuid.UUID]:
        return self._existing_ids(c, op.ids)

    def _run_table_size(self, c: C, op: TableSizeOp) -> int:
        return self._table_size(c)

    def _copy_state(self, c: C, op: copies.CopyStateOp) -> Any:
        """The copy's state, or (see :class:`copies.CopyStateOp`) any copy's."""
        sql = f"SELECT source, state FROM {copies.COPIES}"
        params: tuple[str, ...] = ()
        if op.source is not None:
            sql, params = f"{sql} WHERE source = {self.p}", (op.source,)
        cursor = c.execute(f"{sql} ORDER BY source LIMIT 1", params)  # type: ignore[attr-defined]
        rows = cursor.fetchall()
        if not rows:
            return None
        state = json.loads(rows[0]["state"])
        return state if op.source is not None else (rows[0]["source"], state)

    def _save_copy_state(self, c: C, op: copies.SaveCopyStateOp) -> None:
        p = self.p
        c.execute(  # type: ignore[attr-defined]
            f"INSERT INTO {copies.COPIES} (source, state, updated_at) VALUES ({p}, {p}, {p})"
            " ON CONFLICT (source) DO UPDATE SET state = excluded.state,"
            " updated_at = excluded.updated_at",
            (op.source, json.dumps(dict(op.state), sort_keys=True), time.time()),
        )

    # -- writes, shared --

    def add_rows(self, c: C, op: AddOp) -> list[uuid.UUID]:
        """Insert the memories whose content the user does not have yet; ids in input order."""
        self.lock_user(c, op.user_id)
        hashes = [content_hash(m.content) for m in op.memories]
        ids = self.existing_hashes(c, op.user_id, list(set(hashes)))
        now = utcnow()
        rows = []
        for mem, digest in zip(op.memories, hashes, strict=True):
            if digest in ids:
                continue
            ids[digest] = uuid.uuid4()
            created = mem.created_at or now
            rows.append(
                MemoryRecord(
                    id=ids[digest],
                    user_id=op.user_id,
                    content=mem.content,
                    memory_type=mem.memory_type,  # type: ignore[arg-type]
                    agent_id=mem.agent_id,
                    session_id=mem.session_id,
                    importance=mem.importance,
                    metadata=dict(mem.metadata or {}),
                    created_at=created,
                    accessed_at=created,
                    content_hash=digest,
                    embedding=mem.embedding,
                )
            )
        if rows:
            self._insert(c, op.user_id, rows)
        return [ids[h] for h in hashes]

    def delete_with_passages(self, c: C, user_id: str, ids: Sequence[uuid.UUID]) -> int:
        """Delete the user's records ``ids`` and what was read from any of them (a
        message's passages and standing instructions go with its record: metadata
        ``parent``); how many of ``ids`` went."""
        if not ids:
            return 0
        d = self.dialect
        found: list[uuid.UUID] = []
        for start in range(0, len(ids), 500):
            part = [str(i) for i in ids[start : start + 500]]
            clause, params = d.one_of(d.metadata_text("metadata", "parent"), part)
            rows = c.execute(  # type: ignore[attr-defined]
                f"SELECT id FROM {self.table} WHERE user_id = {d.mark}"
                f" AND memory_type IN ('passage', 'preference') AND {clause}",
                [user_id, *params],
            ).fetchall()
            found += [d.read_id(r["id"]) for r in rows]
        deleted = self.delete_rows(c, user_id, ids)
        if found:
            self.delete_rows(c, user_id, found)
        return deleted

    def _import(self, c: C, records: Sequence[MemoryRecord]) -> int:
        """Insert records as they are, skipping taken ids and content a user already has."""
        by_user: dict[str, list[MemoryRecord]] = {}
        for r in records:
            by_user.setdefault(r.user_id, []).append(r)
        taken = self._existing_ids(c, [r.id for r in records])
        inserted = 0
        for user_id, rows in by_user.items():
            self.lock_user(c, user_id)
            self.changed(c, user_id)
            known = self.existing_hashes(c, user_id, [r.content_hash for r in rows])
            fresh: dict[str, MemoryRecord] = {}
            for r in rows:
                if r.id not in taken and r.content_hash not in known:
                    fresh.setdefault(r.content_hash, r)
            if fresh:
                self._insert(c, user_id, list(fresh.values()))
                inserted += len(fresh)
        return inserted

    def _update(self, c: C, op: UpdateOp) -> MemoryRecord:
        """Check the record exists and new content is not another memory's, then write."""
        self.lock_user(c, op.user_id)
        if not self.by_ids(c, op.user_id, (op.id,)):
            raise NotFoundError(f"memory {op.id} not found for this user_id")
        digest = None
        if op.content is not None:
            digest = content_hash(op.content)
            clash = self.existing_hashes(c, op.user_id, [digest]).get(digest)
            if clash is not None and clash != op.id:
                raise InputError("content", f"the user already has this content as memory {clash}")
        self.write_update(c, op, digest)
        return self.by_ids(c, op.user_id, (op.id,))[0]

    # -- reads, shared --

    def _search_plan(self, op: SearchOp) -> Plan[list[SearchResult]]:
        """Vector, keyword or hybrid hits, each counted as an access unless
        ``op.count_access`` is False. Hybrid: both lists' best, scored by relevance
        (:func:`~tiermem.stores.relevance.fuse`: the same score at every ``limit``)."""
        if op.mode == "vector":
            hits = yield from self._vector_plan(op, op.limit)
        elif op.mode == "keyword":
            hits = yield from self._keyword_plan(op, op.limit)
        else:
            pool = max(op.limit * 3, 20)
            vector = yield from self._vector_plan(op, pool)
            keyword = yield from self._keyword_plan(op, pool)
            hits = fuse(op.text or "", op.vector, vector, keyword, op.limit)
        if not op.count_access:
            return hits
        touched = yield from self.touch_plan([h.record for h in hits])
        return [SearchResult(r, h.score, h.evidence) for r, h in zip(touched, hits, strict=True)]

    def touch_plan(self, records: list[MemoryRecord]) -> Plan[list[MemoryRecord]]:
        """Count an access of each record (one user's) and return them updated."""
        if not records:
            return records
        now = utcnow()
        yield from self._count_access_plan(records[0].user_id, [r.id for r in records], now)
        return [bump_access(r, now) for r in records]

    # -- sync forms of plans other handlers use --

    def by_ids(self, c: C, user_id: str, ids: Sequence[uuid.UUID]) -> list[MemoryRecord]:
        """The user's records with ``ids``, in the order of ``ids``."""
        return run(c, self._by_ids_plan(user_id, ids))

    def page(self, c: C, op: ListOp) -> list[MemoryRecord]:
        """One page of the user's filtered records, newest first."""
        return run(c, self._list_plan(op))

    def _count_access(
        self, c: C, user_id: str, ids: Sequence[uuid.UUID], now: datetime, times: int = 1
    ) -> int:
        """Add ``times`` to the access count of the user's records ``ids``; how many there
        were."""
        return run(c, self._count_access_plan(user_id, ids, now, times))

    def changed(self, c: C, user_id: str) -> None:
        """Advance the user's change generation (see :data:`tr.GENERATIONS`), under the
        user's writer lock: every transaction takes that lock before the generation's row,
        so two writers of one user never wait on each other in opposite orders."""
        self.lock_user(c, user_id)
        c.execute(  # type: ignore[attr-defined]
            f"INSERT INTO {tr.GENERATIONS} (user_id, generation) VALUES ({self.p}, 1)"
            " ON CONFLICT (user_id) DO UPDATE"
            f" SET generation = {tr.GENERATIONS}.generation + 1",
            (user_id,),
        )

    # -- what each engine writes in its SQL --

    def lock_user(self, c: C, user_id: str) -> None:
        """Serialize writers of one user so the content-hash check cannot race."""

    @abstractmethod
    def existing_hashes(self, c: C, user_id: str, hashes: list[str]) -> dict[str, uuid.UUID]:
        """Which of ``hashes`` the user has, and under which id."""

    @abstractmethod
    def _existing_ids(self, c: C, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Which of ``ids`` are in the table (any user)."""

    @abstractmethod
    def _insert(self, c: C, user_id: str, records: Sequence[MemoryRecord]) -> None:
        """Insert ``records`` (not empty, all of ``user_id``) as they are."""

    @abstractmethod
    def write_update(self, c: C, op: UpdateOp, digest: str | None) -> None:
        """Set the fields ``op`` gives; ``digest`` is the new content's hash."""

    @abstractmethod
    def delete_rows(self, c: C, user_id: str, ids: Sequence[uuid.UUID] | None) -> int:
        """Delete the user's records with ``ids`` (all of them for None); how many went."""

    @abstractmethod
    def _by_ids_plan(self, user_id: str, ids: Sequence[uuid.UUID]) -> Plan[list[MemoryRecord]]:
        """The user's records with ``ids``, in the order of ``ids``."""

    @abstractmethod
    def _count_access_plan(
        self, user_id: str, ids: Sequence[uuid.UUID], now: datetime, times: int = 1
    ) -> Plan[int]:
        """Add ``times`` to the access count of the user's records ``ids``; how many there
        were."""

    def _list_plan(self, op: ListOp) -> Plan[list[MemoryRecord]]:
        """One page of the user's filtered records, newest first."""
        clause, params = self._filtered(op.user_id, op.filter)
        sql = (
            f"SELECT {self.columns} FROM {self.table} WHERE {clause}"
            f" ORDER BY created_at DESC, {self.page_order} DESC LIMIT {self.p} OFFSET {self.p}"
        )
        return [self._row_record(r) for r in (yield (sql, [*params, op.limit, op.offset]))]

    def _count_plan(self, op: CountOp) -> Plan[int]:
        """How many of the user's records pass ``op.filter``."""
        clause, params = self._filtered(op.user_id, op.filter)
        rows = yield (f"SELECT count(*) AS n FROM {self.table} WHERE {clause}", params)
        return int(rows[0]["n"])

    def _filtered(self, user_id: str, flt: MemoryFilter) -> Clause:
        """The ``WHERE`` clause of the user's records passing ``flt``, and its parameters."""
        return filter_clause(user_id, flt, self.dialect)

    def _row_record(self, row: Any) -> MemoryRecord:
        """The record a row of :attr:`columns` holds."""
        return read_record(row, self.dialect)

    def _scan_plan(self, op: ScanOp) -> Plan[list[MemoryRecord]]:
        """Up to ``op.limit`` records of every user (or ``op.user_id``'s) with ids above
        ``op.after``, by id."""
        p = self.p
        mine = "" if op.user_id is None else f" AND user_id = {p}"
        sql = f"SELECT {self.columns} FROM {self.table} WHERE id > {p}{mine} ORDER BY id LIMIT {p}"
        start = self.dialect.write_id(op.after or uuid.UUID(int=0))
        params = (start, *(() if op.user_id is None else (op.user_id,)), op.limit)
        return [self._row_record(r) for r in (yield (sql, params))]

    @abstractmethod
    def _stats(self, c: C, user_id: str) -> StoreStats:
        """Aggregate figures about the user's records."""

    @abstractmethod
    def _table_size(self, c: C) -> int:
        """How many records the table holds (all users)."""

    @abstractmethod
    def _vector_plan(self, op: SearchOp, limit: int) -> Plan[list[SearchResult]]:
        """The ``limit`` records nearest ``op.vector``, best first."""

    @abstractmethod
    def _keyword_plan(self, op: SearchOp, limit: int) -> Plan[list[SearchResult]]:
        """The ``limit`` records best matching ``op.text``, best first."""
