"""The work queue's SQL shared by SQLite and PostgreSQL: claims of transcript rows and
leases of session summaries.

:class:`QueueSQL` runs the ops of :mod:`tiermem.stores.queue` inside the store's current
transaction (the facts' leases are :class:`~tiermem.stores.facts_sql.FactsSQL`'s). An
engine gives how a claim locks rows (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite's
write transaction already excludes other writers); a completion writes its index rows
by the index's own deduplicating add, in the same transaction.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tiermem.stores.facts import LEASES
from tiermem.stores.index_sql import IndexSQL
from tiermem.stores.ops import AddOp
from tiermem.stores.plans import Plan
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
from tiermem.stores.sql_part import Handler, Host, SQLPart
from tiermem.stores.transcript import (
    ROW,
    SUMMARIES,
    TRANSCRIPT,
    SessionSummary,
    seqs_marks,
    session_key,
    transcript_row,
)
from tiermem.types.transcript import TranscriptRow, WorkStats


class QueueSQL(SQLPart):
    """Work claims, leases and summary dues for a SQL store; index rows go to ``index``."""

    HANDLERS: ClassVar[dict[type, Handler]] = {
        ClaimOp: Handler("_claim", "write"),
        CompleteOp: Handler("_complete", "write"),
        FailOp: Handler("_fail", "write"),
        ReleaseOp: Handler("_release", "write"),
        RenewOp: Handler("_renew", "write"),
        RetryOp: Handler("_retry", "write"),
        WorkStatsOp: Handler("_work_stats_plan", "read", plan=True),
        QueueStatsOp: Handler("_queue_stats", "read"),
        HeldOp: Handler("_held", "read"),
        SummaryDueOp: Handler("_summary_due", "write"),
        SaveSummaryOp: Handler("_save_summary", "write"),
    }

    def __init__(self, store: Host, index: IndexSQL[Any]) -> None:
        super().__init__(store, index.dialect)
        self.index = index

    # -- the queue's state --

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
            f"SELECT {ROW} FROM {TRANSCRIPT} WHERE state <> 'done' AND state = 'pending'"
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
        self.index.lock_user(c, op.user_id)
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
        ids = self.index.add_rows(c, AddOp(op.user_id, tuple(m for _, m, _ in held)))
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
            self.index.add_rows(c, AddOp(op.user_id, passages))
        return len(held)

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
            f"SELECT {ROW} FROM {TRANSCRIPT} WHERE user_id = {p} AND session_id = {p}"
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
