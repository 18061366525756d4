"""The transcript operations in SQL shared by SQLite and PostgreSQL.

:class:`TranscriptSQL` runs the ops of :mod:`tiermem.stores.transcript` inside the
store's current transaction. An engine gives its parameter mark and how a claim locks rows
(PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite's write transaction already excludes
other writers); index rows are written by the store's own deduplicating add.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from tiermem.clock import Clock
from tiermem.embeddings.cache import content_hash
from tiermem.messages import Message
from tiermem.stores.facts import LEASES, MARKS
from tiermem.stores.ops import AddOp
from tiermem.stores.plans import Plan, first
from tiermem.stores.queue import (
    ClaimOp,
    CompleteOp,
    FailOp,
    HeldOp,
    QueueStats,
    QueueStatsOp,
    ReleaseOp,
    RenewOp,
    RetryOp,
    SaveSummaryOp,
    SummaryDueOp,
    WorkItem,
    WorkStatsOp,
    work_item,
)
from tiermem.stores.transcript import (
    GENERATIONS,
    NO_SESSION,
    SUMMARIES,
    TRANSCRIPT,
    AppendOp,
    ForgetMessagesOp,
    GenerationOp,
    MessageOp,
    RecentOp,
    RestoreOp,
    SessionsOp,
    SessionSummary,
    SummaryOp,
    TranscriptOp,
    UnindexedOp,
    UsersOp,
    epoch,
    from_epoch,
    seqs_marks,
    session_key,
    session_value,
    transcript_row,
)
from tiermem.types.transcript import SessionInfo, TranscriptRow, WorkStats

_GONE = "memory_id, message_id, seq, session_id, line"
"""What a deletion of transcript rows returns: what it leaves to clean up."""
_ROW = (
    "seq, user_id, session_id, message_id, message, state, attempts, error, memory_id,"
    " previous_id, agent_id, line"
)


class TranscriptSQL:
    """Transcript, work-claim and summary operations for a SQL store."""

    p = "?"
    """The engine's parameter mark."""
    claim_lock = ""
    """What a claim's SELECT appends to lock the rows it takes (and skip locked ones)."""
    row_lock = ""
    """What a SELECT appends to lock the row it reads until the transaction ends."""
    user_filter = "user_id"
    """How a query names ``user_id`` when the index on the work state should serve it
    (SQLite: ``+user_id``, so its planner does not walk the user's whole session index)."""
    table: str
    clock: Clock
    """Where lease times come from (:attr:`tiermem.stores.queue.WorkQueue.clock`)."""

    # -- what the engine provides (SQLStore declares them) --

    def _lock_user(self, c: Any, user_id: str) -> None:
        raise NotImplementedError

    def _add(self, c: Any, op: AddOp) -> list[uuid.UUID]:
        raise NotImplementedError

    def _delete(self, c: Any, user_id: str, ids: Sequence[uuid.UUID] | None) -> int:
        raise NotImplementedError

    def _delete_with_passages(self, c: Any, user_id: str, ids: Sequence[uuid.UUID]) -> int:
        raise NotImplementedError

    def _changed(self, c: Any, user_id: str) -> None:
        raise NotImplementedError

    def _forget_facts_of(self, c: Any, user_id: str, lines: dict[str, str | None]) -> None:
        raise NotImplementedError

    def _existing_hashes(self, c: Any, user_id: str, hashes: list[str]) -> dict[str, uuid.UUID]:
        raise NotImplementedError

    # -- appending --

    def _append(self, c: Any, op: AppendOp) -> int:
        """The transcript rows, one statement; a message id the user has is skipped.

        The first message's ``previous_id``, when not given, is the session's last message
        (read by the same statement).
        """
        rows = self._append_rows(op)
        if len(rows) == 1:  # the common case: one statement, one round trip
            return max(int(c.execute(self._append_sql(), rows[0]).rowcount), 0)
        cursor = c.cursor()
        cursor.executemany(self._append_sql(), rows)
        return max(int(cursor.rowcount), 0)

    def _append_all(self, c: Any, ops: Sequence[AppendOp]) -> list[int]:
        """Several appends in order (an engine with round trips sends them at once)."""
        return [self._append(c, op) for op in ops]

    def _append_sql(self) -> str:
        p = self.p
        return (
            f"INSERT INTO {TRANSCRIPT} (user_id, session_id, message_id, agent_id, previous_id,"
            " role, message, line, created_at, added_at, state)"
            f" VALUES ({p}, {p}, {p}, {p}, coalesce({p}, (SELECT message_id FROM {TRANSCRIPT}"
            f" WHERE user_id = {p} AND session_id = {p} ORDER BY seq DESC LIMIT 1)),"
            f" {p}, {p}, {p}, {p}, {p}, {p})"
            " ON CONFLICT (user_id, message_id) DO NOTHING"
        )

    def _append_rows(self, op: AppendOp) -> list[tuple[Any, ...]]:
        """The parameters of :meth:`_append_sql`, one tuple per message of ``op``."""
        session = session_key(op.session_id)
        added = self.clock.time()
        return [
            (
                op.user_id,
                session,
                e.message.message_id,
                e.agent_id,
                e.previous_id,
                op.user_id if i == 0 else None,
                session,
                e.message.role,
                e.json,
                e.line,
                epoch(e.message.timestamp),
                added,
                "pending" if e.line is not None else "done",
            )
            for i, e in enumerate(op.entries)
        ]

    # -- reading --

    # (the reads a context makes are plans: sync and async connections run them alike)

    def _recent_plan(self, op: RecentOp) -> Plan[list[Message]]:
        p = self.p
        rows = yield (
            f"SELECT message FROM {TRANSCRIPT} WHERE user_id = {p} AND session_id = {p}"
            f" ORDER BY seq DESC LIMIT {p}",
            (op.user_id, session_key(op.session_id), op.limit),
        )
        return [Message.from_json(r["message"]) for r in reversed(rows)]

    def _message_plan(self, op: MessageOp) -> Plan[Message | None]:
        p = self.p
        rows = yield (
            f"SELECT message FROM {TRANSCRIPT} WHERE user_id = {p} AND message_id = {p}",
            (op.user_id, op.message_id),
        )
        return Message.from_json(rows[0]["message"]) if rows else None

    def _transcript_plan(self, op: TranscriptOp) -> Plan[list[TranscriptRow]]:
        p = self.p
        where = [f"user_id = {p}", f"seq > {p}"]
        params: list[object] = [op.user_id, op.after]
        if not op.any_session:
            where.append(f"session_id = {p}")
            params.append(session_key(op.session_id))
        if op.state is not None:
            where.append(f"state = {p}")
            params.append(op.state)
        sql = f"SELECT {_ROW} FROM {TRANSCRIPT} WHERE {' AND '.join(where)} ORDER BY seq LIMIT {p}"
        return [transcript_row(r) for r in (yield (sql, [*params, op.limit]))]

    def _sessions_plan(self, op: SessionsOp) -> Plan[list[SessionInfo]]:
        p = self.p
        rows = yield (
            f"SELECT session_id, count(*) AS n, min(created_at) AS first,"
            f" max(created_at) AS last, max(seq) AS newest FROM {TRANSCRIPT}"
            f" WHERE user_id = {p} GROUP BY session_id ORDER BY newest DESC",
            (op.user_id,),
        )
        return [
            SessionInfo(
                session_value(r["session_id"]),
                int(r["n"]),
                from_epoch(r["first"]),
                from_epoch(r["last"]),
            )
            for r in rows
        ]

    def _users_plan(self, op: UsersOp) -> Plan[list[str]]:
        p = self.p
        sql = (
            f"SELECT user_id FROM (SELECT user_id FROM {TRANSCRIPT} UNION"
            f" SELECT user_id FROM {self.table}) AS everyone"
            f" WHERE user_id > {p} ORDER BY user_id LIMIT {p}"
        )
        return [r["user_id"] for r in (yield (sql, (op.after, op.limit)))]

    def _work_stats_plan(self, op: WorkStatsOp) -> Plan[WorkStats]:
        p = self.p
        where, params = ("", []) if op.user_id is None else (f" WHERE user_id = {p}", [op.user_id])
        sql = f"SELECT state, count(*) AS n FROM {TRANSCRIPT}{where} GROUP BY state"
        counts = {r["state"]: int(r["n"]) for r in (yield (sql, params))}
        return WorkStats(counts.get("pending", 0), counts.get("done", 0), counts.get("failed", 0))

    def _queue_stats(self, c: Any, op: QueueStatsOp) -> QueueStats:
        rows = c.execute(
            f"SELECT state, count(*) AS n, min(added_at) AS oldest,"
            f" sum(CASE WHEN lease_until > {self.p} THEN 1 ELSE 0 END) AS claimed"
            f" FROM {TRANSCRIPT} WHERE state <> 'done' GROUP BY state",
            (self.clock.time(),),
        ).fetchall()
        by_state = {r["state"]: r for r in rows}
        pending, failed = by_state.get("pending"), by_state.get("failed")
        return QueueStats(
            pending=int(pending["n"]) if pending else 0,
            claimed=int(pending["claimed"] or 0) if pending else 0,
            failed=int(failed["n"]) if failed else 0,
            oldest_pending=float(pending["oldest"]) if pending else None,
        )

    def _held(self, c: Any, op: HeldOp) -> dict[str, list[int]]:
        p = self.p
        held: dict[str, list[int]] = {}
        for r in c.execute(
            f"SELECT user_id, seq FROM {TRANSCRIPT} WHERE state <> 'done' AND state = 'pending'"
            f" AND lease_owner = {p} AND lease_until > {p} ORDER BY seq",
            (op.owner, self.clock.time()),
        ):
            held.setdefault(r["user_id"], []).append(int(r["seq"]))
        return held

    # -- work claims --

    def _claim(self, c: Any, op: ClaimOp) -> list[WorkItem]:
        p = self.p
        now = self.clock.time()
        rows = c.execute(
            f"SELECT {_ROW} FROM {TRANSCRIPT} WHERE state <> 'done' AND state = 'pending'"
            f" AND lease_until <= {p} ORDER BY seq LIMIT {p}{self.claim_lock}",
            (now, op.limit),
        ).fetchall()
        if not rows:
            return []
        for r in rows:  # (user_id, seq) is the key: each statement stays on one user's shard
            c.execute(
                f"UPDATE {TRANSCRIPT} SET lease_owner = {p}, lease_until = {p},"
                f" attempts = attempts + 1 WHERE user_id = {p} AND seq = {p}",
                (op.owner, now + op.lease, r["user_id"], r["seq"]),
            )
        return [work_item(r, attempts=int(r["attempts"]) + 1) for r in rows]

    def _complete(self, c: Any, op: CompleteOp) -> int:
        """Mark done the rows the owner still holds and index them (one row per line).

        The user's lock comes first, as in every erasure: an erasure and a completion of
        one user never interleave (nor deadlock)."""
        p = self.p
        self._lock_user(c, op.user_id)
        held = []
        for seq, memory, passages in op.items:
            cur = c.execute(
                f"UPDATE {TRANSCRIPT} SET state = 'done', error = NULL, lease_owner = NULL,"
                f" lease_until = 0 WHERE user_id = {p} AND seq = {p} AND lease_owner = {p}"
                " AND state = 'pending'",
                (op.user_id, seq, op.owner),
            )
            if cur.rowcount:
                held.append((seq, memory, passages))
        if not held:
            return 0
        ids = self._add(c, AddOp(op.user_id, tuple(m for _, m, _ in held)))
        c.cursor().executemany(
            f"UPDATE {TRANSCRIPT} SET memory_id = {p} WHERE user_id = {p} AND seq = {p}",
            [(str(i), op.user_id, seq) for i, (seq, _, _) in zip(ids, held, strict=True)],
        )
        passages = tuple(
            row._replace(metadata={**(row.metadata or {}), "parent": str(parent)})
            for parent, (_, _, rows) in zip(ids, held, strict=True)
            for row in rows
        )
        if passages:
            self._add(c, AddOp(op.user_id, passages))
        return len(held)

    def _unindexed_plan(self, op: UnindexedOp) -> Plan[list[TranscriptRow]]:
        p = self.p
        rows = yield (
            f"SELECT {_ROW} FROM {TRANSCRIPT} WHERE state <> 'done' AND {self.user_filter} = {p}"
            f" ORDER BY seq DESC LIMIT {p}",
            (op.user_id, op.limit),
        )
        return [transcript_row(r) for r in rows]

    def _fail(self, c: Any, op: FailOp) -> bool:
        p = self.p
        cur = c.execute(
            f"UPDATE {TRANSCRIPT} SET lease_owner = NULL, lease_until = {p}, error = {p},"
            f" state = CASE WHEN attempts >= {p} THEN 'failed' ELSE 'pending' END"
            f" WHERE user_id = {p} AND seq = {p} AND lease_owner = {p} AND state = 'pending'",
            (
                self.clock.time() + op.retry_in,
                op.error[:2000],
                op.max_attempts,
                op.user_id,
                op.seq,
                op.owner,
            ),
        )
        return bool(cur.rowcount)

    def _release(self, c: Any, op: ReleaseOp) -> int:
        if not op.seqs:
            return 0
        p = self.p
        cur = c.execute(
            f"UPDATE {TRANSCRIPT} SET lease_owner = NULL, lease_until = {p},"
            f" attempts = attempts - 1 WHERE user_id = {p} AND lease_owner = {p}"
            f" AND state = 'pending' AND seq IN ({seqs_marks(p, op.seqs)})",
            (self.clock.time() + op.retry_in, op.user_id, op.owner, *op.seqs),
        )
        return int(cur.rowcount)

    def _renew(self, c: Any, op: RenewOp) -> int:
        """Extend the owner's leases. A row locked this moment (being completed, saved or
        claimed) is skipped: a renewal never waits on a lock, so it cannot deadlock."""
        p, until = self.p, self.clock.time() + op.lease
        by_user: dict[str, list[int]] = {}
        for user, seq in op.rows:
            by_user.setdefault(user, []).append(seq)
        keys: list[tuple[str, str, tuple[Any, ...]]] = []
        for user, seqs in sorted(by_user.items()):
            held = c.execute(
                f"SELECT seq FROM {TRANSCRIPT} WHERE user_id = {p} AND lease_owner = {p}"
                f" AND state = 'pending' AND seq IN ({seqs_marks(p, seqs)}){self.claim_lock}",
                (user, op.owner, *seqs),
            ).fetchall()
            if held:
                mine = [int(r["seq"]) for r in held]
                keys.append((TRANSCRIPT, f"seq IN ({seqs_marks(p, mine)})", (user, *mine)))
        summaries = sorted({(u, session_key(s)) for u, s in op.summaries})
        keys += [(SUMMARIES, f"session_id = {p}", (u, s)) for u, s in summaries]
        keys += [(LEASES, "1 = 1", (u,)) for u in sorted(set(op.fact_users))]
        renewed = 0
        for table, where, params in keys:
            mine_only = f" WHERE user_id = {p} AND {where} AND lease_owner = {p}"
            if (
                table != TRANSCRIPT
                and not c.execute(
                    f"SELECT user_id FROM {table}{mine_only}{self.claim_lock}", (*params, op.owner)
                ).fetchall()
            ):
                continue  # not ours any more, or locked this moment
            cur = c.execute(
                f"UPDATE {table} SET lease_until = {p}{mine_only}", (until, *params, op.owner)
            )
            renewed += max(int(cur.rowcount), 0)
        return renewed

    def _retry(self, c: Any, op: RetryOp) -> int:
        p = self.p
        sql = (
            f"UPDATE {TRANSCRIPT} SET state = 'pending', attempts = 0, lease_until = 0,"
            f" lease_owner = NULL WHERE user_id = {p} AND state = 'failed'"
        )
        params: list[object] = [op.user_id]
        if op.seqs is not None:
            if not op.seqs:
                return 0
            sql += f" AND seq IN ({seqs_marks(p, op.seqs)})"
            params.extend(op.seqs)
        return int(c.execute(sql, params).rowcount)

    # -- summaries --

    def _summary_plan(self, op: SummaryOp) -> Plan[SessionSummary]:
        p = self.p
        row = first(
            (
                yield (
                    f"SELECT text, upto FROM {SUMMARIES} WHERE user_id = {p} AND session_id = {p}",
                    (op.user_id, session_key(op.session_id)),
                )
            )
        )
        return (
            SessionSummary(None, 0)
            if row is None
            else SessionSummary(row["text"], int(row["upto"]))
        )

    def _summary_due(
        self, c: Any, op: SummaryDueOp
    ) -> tuple[SessionSummary, list[TranscriptRow]] | None:
        """Messages older than the window and newer than the summary, if enough and free."""
        p = self.p
        session = session_key(op.session_id)
        now = self.clock.time()
        c.execute(
            f"INSERT INTO {SUMMARIES} (user_id, session_id, upto, updated_at)"
            f" VALUES ({p}, {p}, 0, {p})"
            " ON CONFLICT (user_id, session_id) DO NOTHING",
            (op.user_id, session, now),
        )
        row = c.execute(
            f"SELECT text, upto, lease_until FROM {SUMMARIES}"
            f" WHERE user_id = {p} AND session_id = {p}{self.row_lock}",
            (op.user_id, session),
        ).fetchone()
        if row is None or row["lease_until"] > now:
            return None
        summary = SessionSummary(row["text"], int(row["upto"]))
        window = c.execute(  # the oldest seq still in the window (none: everything goes)
            f"SELECT min(seq) AS first FROM (SELECT seq FROM {TRANSCRIPT} WHERE user_id = {p}"
            f" AND session_id = {p} ORDER BY seq DESC LIMIT {p}) AS newest",
            (op.user_id, session, op.window),
        ).fetchone()
        first = window["first"] if window is not None else None
        if first is None and op.window > 0:
            return None
        rows = c.execute(
            f"SELECT {_ROW} FROM {TRANSCRIPT} WHERE user_id = {p} AND session_id = {p}"
            f" AND seq > {p} AND seq < {p} ORDER BY seq",
            (op.user_id, session, summary.upto, first if first is not None else 2**62),
        ).fetchall()
        if len(rows) < op.batch:
            return None
        c.execute(
            f"UPDATE {SUMMARIES} SET lease_owner = {p}, lease_until = {p}"
            f" WHERE user_id = {p} AND session_id = {p}",
            (op.owner, now + op.lease, op.user_id, session),
        )
        return summary, [transcript_row(r) for r in rows]

    def _save_summary(self, c: Any, op: SaveSummaryOp) -> bool:
        p = self.p
        cur = c.execute(
            f"UPDATE {SUMMARIES} SET text = {p}, upto = {p}, updated_at = {p},"
            " lease_owner = NULL, lease_until = 0"
            f" WHERE user_id = {p} AND session_id = {p} AND lease_owner = {p} AND upto = {p}",
            (
                op.text,
                op.upto,
                self.clock.time(),
                op.user_id,
                session_key(op.session_id),
                op.owner,
                op.previous,
            ),
        )
        return bool(cur.rowcount)

    # -- erasure --

    def _forget_messages(self, c: Any, op: ForgetMessagesOp) -> int:
        """Delete transcript rows (and index rows left without a message)."""
        p = self.p
        self._lock_user(c, op.user_id)
        if op.session:
            where, params = f"session_id = {p}", [session_key(op.session_id)]
            c.execute(
                f"DELETE FROM {SUMMARIES} WHERE user_id = {p} AND session_id = {p}",
                (op.user_id, session_key(op.session_id)),
            )
        else:
            if not op.message_ids:
                return 0
            where = f"message_id IN ({seqs_marks(p, op.message_ids)})"
            params = list(op.message_ids)
        rows = c.execute(  # RETURNING: the memory ids as of the delete, after any lock wait
            f"DELETE FROM {TRANSCRIPT} WHERE user_id = {p} AND {where} RETURNING {_GONE}",
            [op.user_id, *params],
        ).fetchall()
        deleted = len(rows)
        self._forget_derived(c, op.user_id, rows)
        memory_ids = list({r["memory_id"] for r in rows if r["memory_id"] is not None})
        if memory_ids:
            shared = {
                r["memory_id"]
                for r in c.execute(
                    f"SELECT DISTINCT memory_id FROM {TRANSCRIPT} WHERE user_id = {p}"
                    f" AND memory_id IN ({seqs_marks(p, memory_ids)})",
                    [op.user_id, *memory_ids],
                )
            }
            alone = [uuid.UUID(m) for m in memory_ids if m not in shared]
            self._delete_with_passages(c, op.user_id, alone)
        return deleted

    def _forget_transcript(self, c: Any, user_id: str, memory_ids: Sequence[str] | None) -> int:
        """Delete the user's transcript (and summaries), or the rows behind ``memory_ids``;
        how many texts of the deleted messages the index did not hold yet."""
        p = self.p
        if memory_ids is None:
            unindexed = c.execute(  # distinct texts the index does not hold yet
                f"SELECT count(DISTINCT line) AS n FROM {TRANSCRIPT} AS t WHERE user_id = {p}"
                " AND state <> 'done' AND line IS NOT NULL AND NOT EXISTS (SELECT 1 FROM"
                f" {self.table} AS m WHERE m.user_id = t.user_id AND m.content = t.line)",
                (user_id,),
            ).fetchone()["n"]
            c.execute(f"DELETE FROM {TRANSCRIPT} WHERE user_id = {p}", (user_id,))
            c.execute(f"DELETE FROM {SUMMARIES} WHERE user_id = {p}", (user_id,))
            return int(unindexed)
        gone: list[Any] = []
        for start in range(0, len(memory_ids), 500):
            part = list(memory_ids[start : start + 500])
            gone += c.execute(
                f"DELETE FROM {TRANSCRIPT} WHERE user_id = {p}"
                f" AND memory_id IN ({seqs_marks(p, part)}) RETURNING {_GONE}",
                [user_id, *part],
            ).fetchall()
        self._forget_derived(c, user_id, gone)
        return 0

    def _forget_derived(self, c: Any, user_id: str, rows: Sequence[Any]) -> None:
        """What deleted transcript ``rows`` leave behind goes too: the running summary of
        their session when it covers one of them (the worker writes it again from the
        messages left), the session's ``summary`` memories, and the facts read from them."""
        if not rows:
            return
        p = self.p
        self._changed(c, user_id)
        first: dict[str, int] = {}
        for r in rows:
            first[r["session_id"]] = min(int(r["seq"]), first.get(r["session_id"], 2**62))
        for session, seq in first.items():
            c.execute(
                f"DELETE FROM {SUMMARIES} WHERE user_id = {p} AND session_id = {p} AND upto >= {p}",
                (user_id, session, seq),
            )
            summaries = c.execute(
                f"SELECT id FROM {self.table} WHERE user_id = {p} AND memory_type = 'summary'"
                f" AND session_id {'IS NULL' if session == NO_SESSION else '= ' + p}",
                (user_id,) if session == NO_SESSION else (user_id, session),
            ).fetchall()
            if summaries:
                self._delete(c, user_id, [uuid.UUID(str(r["id"])) for r in summaries])
        self._forget_facts_of(c, user_id, {r["message_id"]: r["line"] for r in rows})

    # -- generations and restoring --

    def _generation_plan(self, op: GenerationOp) -> Plan[int]:
        sql = f"SELECT generation FROM {GENERATIONS} WHERE user_id = {self.p}"
        row = first((yield (sql, (op.user_id,))))
        return 0 if row is None else int(row["generation"])

    def _restore(self, c: Any, op: RestoreOp) -> int:
        """Insert an archive's transcript rows as they were, then its summaries and marks."""
        p = self.p
        self._lock_user(c, op.user_id)
        self._changed(c, op.user_id)
        hashes = {r.entry.line: content_hash(r.entry.line) for r in op.rows if r.entry.line}
        indexed = self._existing_hashes(c, op.user_id, list(set(hashes.values())))
        added = self.clock.time()
        params = []
        for r in op.rows:
            e = r.entry
            memory_id = indexed.get(hashes[e.line]) if e.line else None
            state = r.state
            if state == "done" and e.line is not None and memory_id is None:
                state = "pending"  # its index row is not there: the worker makes it again
            params.append(
                (
                    op.user_id,
                    session_key(r.session_id),
                    e.message.message_id,
                    e.agent_id,
                    e.previous_id,
                    e.message.role,
                    e.json,
                    e.line,
                    epoch(e.message.timestamp),
                    added,
                    None if memory_id is None else str(memory_id),
                    state,
                    r.attempts,
                    r.error,
                )
            )
        count = 0
        if params:
            cursor = c.cursor()
            cursor.executemany(
                f"INSERT INTO {TRANSCRIPT} (user_id, session_id, message_id, agent_id,"
                " previous_id, role, message, line, created_at, added_at, memory_id, state,"
                f" attempts, error) VALUES ({seqs_marks(p, params[0])})"
                " ON CONFLICT (user_id, message_id) DO NOTHING",
                params,
            )
            count = max(int(cursor.rowcount), 0)
        for table, extra, items in (
            (SUMMARIES, ("text",), [(s, (t,), m) for s, t, m in op.summaries]),
            (MARKS, (), [(s, (), m) for s, m in op.marks]),
        ):
            for session, values, upto_id in items:
                seq = self._seq_of(c, op.user_id, upto_id)
                if seq is None:
                    continue
                columns = ", ".join(("user_id", "session_id", *extra, "upto", "updated_at"))
                c.execute(
                    f"INSERT INTO {table} ({columns}) VALUES"
                    f" ({seqs_marks(p, range(4 + len(extra)))})"
                    " ON CONFLICT (user_id, session_id) DO NOTHING",
                    (op.user_id, session_key(session), *values, seq, added),
                )
        return count

    def _seq_of(self, c: Any, user_id: str, message_id: str) -> int | None:
        row = c.execute(
            f"SELECT seq FROM {TRANSCRIPT} WHERE user_id = {self.p} AND message_id = {self.p}",
            (user_id, message_id),
        ).fetchone()
        return None if row is None else int(row["seq"])
