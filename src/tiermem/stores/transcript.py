"""The transcript: every message a user's conversations held, the source of truth.

One dimension-free table per database, ``tiermem_transcript``, keeps each message whole
(its lossless JSON and its line, ``"speaker: text"``) in the order it was added, one row
per occurrence: appending a message writes this one row, nothing else. The searchable
index (``memories_{dim}``) is derived from it: a row's work state (``pending`` / ``done``
/ ``failed``) says whether a worker still has to embed it and write its index row. Until
then its line is found by :class:`UnindexedOp` (the planner's keyword search reads it).
The work that leaves (index, summaries) is claimed through :mod:`tiermem.stores.queue`.
``tiermem_summaries`` keeps each session's running summary with the last transcript
position it covers.

The SQL here is written once for both engines (``{p}`` is the parameter mark; times are
epoch seconds in both); the engine-specific parts are the id column and row locking.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple

from tiermem.messages import Message
from tiermem.stores.schema import Migration
from tiermem.types.transcript import TranscriptRow

TRANSCRIPT = "tiermem_transcript"
SUMMARIES = "tiermem_summaries"
GENERATIONS = "tiermem_generations"
"""Per user, a number every write that changes what a cache may hold advances (in the
write's transaction): a cached synopsis remembers the generation it was made at, so a
process never serves one made before a change, whichever process made the change."""
NO_SESSION = ""
"""The session column of messages added without a session (NULL cannot be a key)."""

WORK_STATES = ("pending", "done", "failed")


def session_key(session_id: str | None) -> str:
    return NO_SESSION if session_id is None else session_id


def session_value(key: str) -> str | None:
    return None if key == NO_SESSION else key


def epoch(value: datetime) -> float:
    return value.timestamp()


def from_epoch(value: float) -> datetime:
    return datetime.fromtimestamp(value, tz=timezone.utc)


# -- data ------------------------------------------------------------------------------


class Entry(NamedTuple):
    """A message to append: the message, its transcript line (``None``: nothing to index,
    e.g. a tool call without text) and where it belongs."""

    message: Message
    json: str
    line: str | None
    agent_id: str | None
    previous_id: str | None


@dataclass(frozen=True)
class SessionSummary:
    """A session's running summary and the last transcript ``seq`` it covers."""

    text: str | None
    upto: int


# -- operations ----------------------------------------------------------------------


class AppendOp(NamedTuple):
    """Append messages of one (user, session) to the transcript; a message id the user
    already has is skipped. Result: how many were added."""

    user_id: str
    session_id: str | None
    entries: tuple[Entry, ...]


class RecentOp(NamedTuple):
    """The newest ``limit`` messages of a (user, session), oldest first."""

    user_id: str
    session_id: str | None
    limit: int


class MessageOp(NamedTuple):
    """The user's message with this id, whole (None when the user has none)."""

    user_id: str
    message_id: str


class TranscriptOp(NamedTuple):
    """A page of a user's transcript rows after ``after`` (by seq), optionally one
    session's, optionally one state's."""

    user_id: str
    session_id: str | None = None
    any_session: bool = True
    state: str | None = None
    after: int = 0
    limit: int = 100


class SessionsOp(NamedTuple):
    """A user's sessions, most recently active first."""

    user_id: str


class UsersOp(NamedTuple):
    """Admin (every user): the ids of the users with messages or memories, in order,
    those after ``after`` only, at most ``limit``."""

    limit: int = 100
    after: str = ""


class UnindexedOp(NamedTuple):
    """The user's newest rows not in the index yet (pending or failed), newest first:
    what keyword search must read beside the index."""

    user_id: str
    limit: int = 500


class SummaryOp(NamedTuple):
    """A session's running summary (``SessionSummary(None, 0)`` when there is none)."""

    user_id: str
    session_id: str | None


class ForgetMessagesOp(NamedTuple):
    """Delete messages of a user by message id (all of a session's when ``session`` is
    set, with its summary); index rows no other message shares go too. Result: how many
    messages were deleted."""

    user_id: str
    message_ids: tuple[str, ...] = ()
    session: bool = False
    session_id: str | None = None


class GenerationOp(NamedTuple):
    """The user's change generation (0 before any change; see :data:`GENERATIONS`)."""

    user_id: str


class RestoredRow(NamedTuple):
    """A transcript row to restore as it was (an archive's ``message`` line): the entry,
    its session, and its work state, attempts and error."""

    entry: Entry
    session_id: str | None
    state: str
    attempts: int
    error: str | None


class RestoreOp(NamedTuple):
    """Restore a user's transcript rows (in order; a message id the user has is skipped),
    the sessions' summaries and fact marks (each covering up to a message id; a session
    that has one keeps it). A done row is linked to the index row holding its line, or
    queued again. Result: how many rows were added."""

    user_id: str
    rows: tuple[RestoredRow, ...]
    summaries: tuple[tuple[str | None, str, str], ...] = ()
    marks: tuple[tuple[str | None, str], ...] = ()


# -- schema --------------------------------------------------------------------------


def transcript_table(seq_column: str, primary_key: str) -> list[str]:
    """The statements creating the transcript table and its indexes.

    ``seq_column`` declares the ordering column, ``primary_key`` the table constraint
    (SQLite's rowid alias; ``(user_id, seq)`` on PostgreSQL so rows can be distributed by
    user).
    """
    return [
        f"""CREATE TABLE IF NOT EXISTS {TRANSCRIPT} (
            {seq_column},
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            agent_id TEXT,
            previous_id TEXT,
            role TEXT NOT NULL,
            message TEXT NOT NULL,
            line TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            added_at DOUBLE PRECISION NOT NULL,
            memory_id TEXT,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            lease_owner TEXT,
            lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
            {primary_key}
            UNIQUE (user_id, message_id))""",
        f"CREATE INDEX IF NOT EXISTS {TRANSCRIPT}_session"
        f" ON {TRANSCRIPT} (user_id, session_id, seq)",
        # the rows still to index (few: the worker keeps up); claims and the keyword search
        # of unindexed messages read them. Every index costs each add: keep them few.
        f"CREATE INDEX IF NOT EXISTS {TRANSCRIPT}_unindexed ON {TRANSCRIPT} (seq)"
        " WHERE state <> 'done'",
    ]


def migrations(seq_column: str, primary_key: str) -> dict[str, list[Migration]]:
    """The schema history of the transcript, summaries and generations tables (shared by
    every dimension's index); ``seq_column`` and ``primary_key`` as for
    :func:`transcript_table`. Append, never edit.

    Each first step creates its table if it is missing: databases made before the tables
    had histories of their own (when the index table's migrations made them) hold them
    already, and record the step without a change.
    """
    return {
        TRANSCRIPT: [
            Migration("001_create", lambda t, d: transcript_table(seq_column, primary_key))
        ],
        SUMMARIES: [
            Migration(
                "001_create",
                lambda t, d: [
                    f"""CREATE TABLE IF NOT EXISTS {SUMMARIES} (
                        user_id TEXT NOT NULL,
                        session_id TEXT NOT NULL,
                        text TEXT,
                        upto BIGINT NOT NULL DEFAULT 0,
                        updated_at DOUBLE PRECISION NOT NULL,
                        lease_owner TEXT,
                        lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
                        PRIMARY KEY (user_id, session_id))"""
                ],
            )
        ],
        GENERATIONS: [
            Migration(
                "001_create",
                lambda t, d: [
                    f"""CREATE TABLE IF NOT EXISTS {GENERATIONS} (
                        user_id TEXT NOT NULL PRIMARY KEY,
                        generation BIGINT NOT NULL DEFAULT 0)"""
                ],
            )
        ],
    }


# -- reading rows ----------------------------------------------------------------------

ROW = (
    "seq, user_id, session_id, message_id, message, state, attempts, error, memory_id,"
    " previous_id, agent_id, line"
)
"""The columns of a transcript row a read selects (:func:`transcript_row` reads them)."""


def transcript_row(row: Any) -> TranscriptRow:
    return TranscriptRow(
        **message_columns(row),
        state=row["state"],
        attempts=int(row["attempts"]),
        error=row["error"],
        memory_id=row["memory_id"],
    )


def message_columns(row: Any) -> dict[str, Any]:
    """The columns of a transcript row (read by name) that say which message it holds
    and where: seq, user, session, agent, the message and the id of the one before it."""
    return {
        "seq": int(row["seq"]),
        "user_id": row["user_id"],
        "session_id": session_value(row["session_id"]),
        "agent_id": row["agent_id"],
        "message": Message.from_json(row["message"]),
        "previous_id": row["previous_id"],
    }


def message_json(message: Message) -> str:
    """The stored form of a message (lossless; validated to encode before it is stored)."""
    return json.dumps(message.to_dict(), ensure_ascii=False, allow_nan=False)


def seqs_marks(mark: str, items: Sequence[Any]) -> str:
    return ",".join([mark] * len(items))
