"""The transcript as the contract returns it: a :class:`TranscriptRow` (a message as
stored, with its work state), a :class:`SessionInfo`, and :class:`WorkStats` (rows by
work state)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tiermem.messages import Message


@dataclass(frozen=True)
class TranscriptRow:
    """One transcript row as stored, with its work state."""

    seq: int
    user_id: str
    session_id: str | None
    message: Message
    state: str
    attempts: int
    error: str | None
    memory_id: str | None
    previous_id: str | None = None
    agent_id: str | None = None


@dataclass(frozen=True)
class SessionInfo:
    """A session of a user: how many messages and when the first and last were said."""

    session_id: str | None
    messages: int
    first: datetime
    last: datetime


@dataclass(frozen=True)
class WorkStats:
    """Transcript rows by work state (one user's, or everyone's)."""

    pending: int
    done: int
    failed: int
