"""The transcript operations in SQL shared by SQLite and PostgreSQL.

:class:`TranscriptSQL` runs the ops of :mod:`tiermem.stores.transcript` inside the
store's current transaction, and the erasures of memories and users (a deletion takes
what came of the deleted rows in every part: index rows through the index's SQL, facts
through the facts'). An engine may send several appends at once (PostgreSQL pipelines
them: :meth:`TranscriptSQL.append_all`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, ClassVar

from tiermem.embeddings.cache import content_hash
from tiermem.messages import Message
from tiermem.stores.facts import MARKS
from tiermem.stores.facts_sql import FactsSQL
from tiermem.stores.index_sql import IndexSQL
from tiermem.stores.ops import DeleteOp, DeleteUserOp
from tiermem.stores.plans import Plan, first
from tiermem.stores.sql_part import Handler, Host, SQLPart
from tiermem.stores.transcript import (
    GENERATIONS,
    NO_SESSION,
    ROW,
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
from tiermem.types.transcript import SessionInfo, TranscriptRow

_GONE = "memory_id, message_id, seq, session_id, line"
"""What a deletion of transcript rows returns: what it leaves to clean up."""


class TranscriptSQL(SQLPart):
    """The transcript's operations for a SQL store, and erasures (they span the parts:
    index rows go through ``index``, what facts were read from through ``facts``)."""

    HANDLERS: ClassVar[dict[type, Handler]] = {
        AppendOp: Handler("_append", "write"),
        RecentOp: Handler("_recent_plan", "read", plan=True),
        MessageOp: Handler("_message_plan", "read", plan=True),
        TranscriptOp: Handler("_transcript_plan", "read", plan=True),
        SessionsOp: Handler("_sessions_plan", "read", plan=True),
        UsersOp: Handler("_users_plan", "read", plan=True),
        SummaryOp: Handler("_summary_plan", "read", plan=True),
        UnindexedOp: Handler("_unindexed_plan", "read", plan=True),
        GenerationOp: Handler("_generation_plan", "read", plan=True),
        RestoreOp: Handler("_restore", "write"),
        ForgetMessagesOp: Handler("_forget_messages", "write"),
        DeleteOp: Handler("_delete_memories", "write"),
        DeleteUserOp: Handler("_delete_user", "write"),
    }

    def __init__(self, store: Host, index: IndexSQL[Any], facts: FactsSQL) -> None:
        super().__init__(store, index.dialect)
        self.index = index
        self.facts = facts

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

    def append_all(self, c: Any, ops: Sequence[AppendOp]) -> list[int]:
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
        sql = f"SELECT {ROW} FROM {TRANSCRIPT} WHERE {' AND '.join(where)} ORDER BY seq LIMIT {p}"
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

    def _unindexed_plan(self, op: UnindexedOp) -> Plan[list[TranscriptRow]]:
        p = self.p
        rows = yield (
            f"SELECT {ROW} FROM {TRANSCRIPT} WHERE state <> 'done' AND {self.user_filter} = {p}"
            f" ORDER BY seq DESC LIMIT {p}",
            (op.user_id, op.limit),
        )
        return [transcript_row(r) for r in rows]

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

    # -- erasure (a deletion by message, memory or user takes what came of it in every part) --

    def _delete_memories(self, c: Any, op: DeleteOp) -> int:
        """The user's memories ``op.ids``, the transcript rows behind them and what was
        read from them."""
        self.index.lock_user(c, op.user_id)  # a worker indexing the user finishes first
        self.index.changed(c, op.user_id)
        self._forget_transcript(c, op.user_id, [str(i) for i in op.ids])
        return self.index.delete_with_passages(c, op.user_id, op.ids)

    def _delete_user(self, c: Any, op: DeleteUserOp) -> int:
        """Every part's rows of the user; messages not indexed yet count as memories too."""
        self.index.lock_user(c, op.user_id)
        self.index.changed(c, op.user_id)
        self.facts.forget_marks(c, op.user_id)
        forgotten = self._forget_transcript(c, op.user_id, None)
        return forgotten + self.index.delete_rows(c, op.user_id, None)

    def _forget_messages(self, c: Any, op: ForgetMessagesOp) -> int:
        """Delete transcript rows (and index rows left without a message)."""
        p = self.p
        self.index.lock_user(c, op.user_id)
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
            self.index.delete_with_passages(c, op.user_id, alone)
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
        self.index.changed(c, user_id)
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
                self.index.delete_rows(c, user_id, [uuid.UUID(str(r["id"])) for r in summaries])
        self.facts.forget_facts_of(c, user_id, {r["message_id"]: r["line"] for r in rows})

    # -- generations and restoring --

    def _generation_plan(self, op: GenerationOp) -> Plan[int]:
        sql = f"SELECT generation FROM {GENERATIONS} WHERE user_id = {self.p}"
        row = first((yield (sql, (op.user_id,))))
        return 0 if row is None else int(row["generation"])

    def _restore(self, c: Any, op: RestoreOp) -> int:
        """Insert an archive's transcript rows as they were, then its summaries and marks."""
        p = self.p
        self.index.lock_user(c, op.user_id)
        self.index.changed(c, op.user_id)
        hashes = {r.entry.line: content_hash(r.entry.line) for r in op.rows if r.entry.line}
        indexed = self.index.existing_hashes(c, op.user_id, list(set(hashes.values())))
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
