"""The fact operations in SQL shared by SQLite and PostgreSQL.

:class:`FactsSQL`, the work queue's second part of SQL, runs the ops of
:mod:`tiermem.stores.facts` inside the store's current transaction. A save checks the lease and
the mark in the transaction that writes, so a batch is applied once or not at all.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from tiermem.embeddings.cache import content_hash
from tiermem.stores.facts import (
    LEASES,
    MARKS,
    DueSessionsOp,
    FactMark,
    FactMarkOp,
    FactsDue,
    FactsDueOp,
    FactsFailOp,
    FactVersionsOp,
    FactWrite,
    SaveFactsOp,
    current,
)
from tiermem.stores.index_sql import IndexSQL
from tiermem.stores.ops import AddOp, ListOp, UpdateOp
from tiermem.stores.sql_part import Handler, Host, SQLPart
from tiermem.stores.transcript import ROW, TRANSCRIPT, session_key, session_value, transcript_row
from tiermem.types.filters import MemoryFilter
from tiermem.types.records import MemoryRecord

_MAX_EVIDENCE = 5
_MAX_VERSIONS = 1000


class FactsSQL(SQLPart):
    """Fact extraction marks, user leases and versioned fact writes for a SQL store (the
    facts are memories of the index: written through ``index``)."""

    HANDLERS: ClassVar[dict[type, Handler]] = {
        DueSessionsOp: Handler("_due_sessions", "read"),
        FactsDueOp: Handler("_facts_due", "write"),
        SaveFactsOp: Handler("_save_facts", "write"),
        FactsFailOp: Handler("_facts_fail", "write"),
        FactMarkOp: Handler("_fact_mark", "read"),
        FactVersionsOp: Handler("_fact_versions", "read"),
    }

    def __init__(self, store: Host, index: IndexSQL[Any]) -> None:
        super().__init__(store, index.dialect)
        self.index = index

    # -- finding and leasing work --

    def _due_sessions(self, c: Any, op: DueSessionsOp) -> list[tuple[str, str | None]]:
        p = self.p
        now = self.clock.time()
        rows = c.execute(
            f"SELECT t.user_id, t.session_id FROM {TRANSCRIPT} t"
            f" LEFT JOIN {MARKS} m ON m.user_id = t.user_id AND m.session_id = t.session_id"
            f" LEFT JOIN {LEASES} l ON l.user_id = t.user_id"
            f" WHERE t.seq > COALESCE(m.upto, 0) AND COALESCE(m.retry_at, 0) <= {p}"
            f" AND COALESCE(l.lease_until, 0) <= {p}"
            f" GROUP BY t.user_id, t.session_id HAVING count(*) >= {p} LIMIT {p}",
            (now, now, op.batch, op.limit),
        ).fetchall()
        return [(r["user_id"], session_value(r["session_id"])) for r in rows]

    def _facts_due(self, c: Any, op: FactsDueOp) -> FactsDue | None:
        p = self.p
        now = self.clock.time()
        session = session_key(op.session_id)
        c.execute(
            f"INSERT INTO {LEASES} (user_id) VALUES ({p}) ON CONFLICT (user_id) DO NOTHING",
            (op.user_id,),
        )
        lease = c.execute(
            f"SELECT lease_owner, lease_until FROM {LEASES} WHERE user_id = {p}{self.row_lock}",
            (op.user_id,),
        ).fetchone()
        if lease["lease_until"] > now and lease["lease_owner"] != op.owner:
            return None
        c.execute(
            f"INSERT INTO {MARKS} (user_id, session_id, updated_at) VALUES ({p}, {p}, {p})"
            " ON CONFLICT (user_id, session_id) DO NOTHING",
            (op.user_id, session, now),
        )
        mark = c.execute(
            f"SELECT upto, retry_at FROM {MARKS} WHERE user_id = {p} AND session_id = {p}",
            (op.user_id, session),
        ).fetchone()
        if not op.force and mark["retry_at"] > now:
            return None
        rows = c.execute(
            f"SELECT {ROW} FROM {TRANSCRIPT} WHERE user_id = {p} AND session_id = {p}"
            f" AND seq > {p} ORDER BY seq LIMIT {p}",
            (op.user_id, session, mark["upto"], op.limit),
        ).fetchall()
        if not rows or len(rows) < op.batch:
            return None
        c.execute(
            f"UPDATE {LEASES} SET lease_owner = {p}, lease_until = {p} WHERE user_id = {p}",
            (op.owner, now + op.lease, op.user_id),
        )
        return FactsDue(int(mark["upto"]), [transcript_row(r) for r in rows])

    # -- writing --

    def _save_facts(self, c: Any, op: SaveFactsOp) -> list[str] | None:
        p = self.p
        session = session_key(op.session_id)
        # the user's lock before any row of theirs, as erasures and completions take it:
        # the other order deadlocks with a concurrent forget_user
        self.index.lock_user(c, op.user_id)
        lease = c.execute(
            f"SELECT lease_owner FROM {LEASES} WHERE user_id = {p}{self.row_lock}",
            (op.user_id,),
        ).fetchone()
        mark = c.execute(
            f"SELECT upto FROM {MARKS} WHERE user_id = {p} AND session_id = {p}",
            (op.user_id, session),
        ).fetchone()
        if lease is None or lease["lease_owner"] != op.owner:
            return None
        if mark is None or int(mark["upto"]) != op.previous:
            return None
        ids = [self._write_fact(c, op.user_id, w) for w in op.writes]
        if op.writes:
            self.index.changed(c, op.user_id)
        c.execute(
            f"UPDATE {MARKS} SET upto = {p}, attempts = 0, error = NULL, retry_at = 0,"
            f" updated_at = {p} WHERE user_id = {p} AND session_id = {p}",
            (op.upto, self.clock.time(), op.user_id, session),
        )
        c.execute(
            f"UPDATE {LEASES} SET lease_owner = NULL, lease_until = 0 WHERE user_id = {p}",
            (op.user_id,),
        )
        return [i for i in ids if i is not None]

    def _write_fact(self, c: Any, user_id: str, write: FactWrite) -> str | None:
        """Write one decided fact; the id of the fact that now says it."""
        if write.memory is None:
            if write.merge_into is None:
                return None
            return self._merge_fact(c, user_id, write.merge_into, write)
        memory = write.memory
        digest = content_hash(memory.content)
        known = self.index.existing_hashes(c, user_id, [digest]).get(digest)
        if known is not None:  # the same text is known: one fact, its sources extended
            target = self._merge_fact(c, user_id, str(known), write, reopen=True)
            if target is None:
                return None
        else:
            target = str(self.index.add_rows(c, AddOp(user_id, (memory,)))[0])
        if write.replaces is not None and write.replaces != target:
            valid_from = (memory.metadata or {}).get("valid_from")
            self._close_fact(c, user_id, write.replaces, target, valid_from, write.change)
        return target

    def _merge_fact(
        self, c: Any, user_id: str, memory_id: str, write: FactWrite, *, reopen: bool = False
    ) -> str | None:
        """Add ``write``'s sources to a known fact (reopened if it was closed and says the
        new fact word for word); None if it is not a fact of the user."""
        record = self._fact(c, user_id, memory_id)
        if record is None:
            return None
        metadata = dict(record.metadata)
        metadata["sources"] = list(dict.fromkeys([*metadata.get("sources", []), *write.sources]))
        evidence = list(dict.fromkeys([*metadata.get("evidence", []), *write.evidence]))
        metadata["evidence"] = evidence[:_MAX_EVIDENCE]
        metadata["mentions"] = int(metadata.get("mentions", 1)) + max(len(write.sources), 1)
        if reopen and not current(metadata):
            metadata["valid_until"] = None
            metadata.pop("superseded_by", None)
        self.index.write_update(c, UpdateOp(user_id, record.id, metadata=metadata), None)
        return str(record.id)

    def _close_fact(
        self,
        c: Any,
        user_id: str,
        memory_id: str,
        successor: str,
        until: Any,
        change: str | None,
    ) -> None:
        """Mark a current fact as no longer current from ``until`` (its text is kept)."""
        record = self._fact(c, user_id, memory_id)
        if record is None or not current(record.metadata):
            return
        metadata = {**record.metadata, "valid_until": until, "superseded_by": successor}
        if change is not None:
            metadata["change"] = change
        self.index.write_update(c, UpdateOp(user_id, record.id, metadata=metadata), None)

    def _fact(self, c: Any, user_id: str, memory_id: str) -> MemoryRecord | None:
        try:
            key = uuid.UUID(str(memory_id))
        except ValueError:
            return None
        found = self.index.by_ids(c, user_id, [key])
        if not found or found[0].memory_type != "fact":
            return None
        return found[0]

    def _facts_fail(self, c: Any, op: FactsFailOp) -> bool:
        p = self.p
        cur = c.execute(
            f"UPDATE {MARKS} SET attempts = attempts + 1, error = {p}, retry_at = {p},"
            f" updated_at = {p} WHERE user_id = {p} AND session_id = {p}",
            (
                op.error[:2000],
                self.clock.time() + op.retry_in,
                self.clock.time(),
                op.user_id,
                session_key(op.session_id),
            ),
        )
        c.execute(
            f"UPDATE {LEASES} SET lease_owner = NULL, lease_until = 0"
            f" WHERE user_id = {p} AND lease_owner = {p}",
            (op.user_id, op.owner),
        )
        return bool(cur.rowcount)

    def forget_marks(self, c: Any, user_id: str) -> None:
        """Erase a user's extraction marks and lease (with the user's memories)."""
        c.execute(f"DELETE FROM {MARKS} WHERE user_id = {self.p}", (user_id,))
        c.execute(f"DELETE FROM {LEASES} WHERE user_id = {self.p}", (user_id,))

    def forget_facts_of(self, c: Any, user_id: str, lines: dict[str, str | None]) -> None:
        """Undo what forgotten messages (``lines``: message id -> line) taught: a fact read
        only from them goes (the version it had closed is current again); a fact also
        read from others loses their ids and evidence."""
        gone = set(lines)
        said = [line for line in lines.values() if line]
        facts: list[MemoryRecord] = []
        page = ListOp(user_id, MemoryFilter(memory_types=("fact",)), 1000, 0)
        while True:
            found = self.index.page(c, page)
            facts += found
            if len(found) < page.limit:
                break
            page = page._replace(offset=page.offset + page.limit)
        dropped = {
            r.id for r in facts if r.metadata.get("sources") and set(r.metadata["sources"]) <= gone
        }
        for record in facts:
            metadata = dict(record.metadata)
            sources = metadata.get("sources") or []
            if record.id in dropped or not gone.intersection(sources):
                continue
            metadata["sources"] = [s for s in sources if s not in gone]
            metadata["evidence"] = [
                e
                for e in metadata.get("evidence") or []
                if not any(str(line).startswith(str(e)) for line in said)
            ]
            self.index.write_update(c, UpdateOp(user_id, record.id, metadata=metadata), None)
        for record in facts:
            older = record.metadata.get("replaces")
            if record.id not in dropped or not older:
                continue
            previous = self._fact(c, user_id, str(older))
            if previous is None or previous.id in dropped:
                continue
            if str(previous.metadata.get("superseded_by")) == str(record.id):
                metadata = {**previous.metadata, "valid_until": None}
                for key in ("superseded_by", "change"):
                    metadata.pop(key, None)
                self.index.write_update(c, UpdateOp(user_id, previous.id, metadata=metadata), None)
        if dropped:
            self.index.delete_rows(c, user_id, sorted(dropped))

    # -- reading --

    def _fact_mark(self, c: Any, op: FactMarkOp) -> FactMark:
        p = self.p
        row = c.execute(
            f"SELECT upto, attempts, error, retry_at FROM {MARKS}"
            f" WHERE user_id = {p} AND session_id = {p}",
            (op.user_id, session_key(op.session_id)),
        ).fetchone()
        if row is None:
            return FactMark(0, 0, None, 0.0)
        return FactMark(int(row["upto"]), int(row["attempts"]), row["error"], row["retry_at"])

    def _fact_versions(self, c: Any, op: FactVersionsOp) -> list[MemoryRecord]:
        start = self._fact(c, op.user_id, op.memory_id)
        if start is None:
            return []
        seen = {str(start.id)}
        older: list[MemoryRecord] = []
        newer: list[MemoryRecord] = []
        for link, out in (("replaces", older), ("superseded_by", newer)):
            record = start
            while len(seen) < _MAX_VERSIONS:
                nxt = record.metadata.get(link)
                if not nxt or str(nxt) in seen:
                    break
                found = self._fact(c, op.user_id, str(nxt))
                if found is None:
                    break
                seen.add(str(found.id))
                out.append(found)
                record = found
        return [*reversed(older), start, *newer]
