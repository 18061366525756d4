"""The transcript's derived methods of a store, each with its async twin.

:class:`TranscriptAPI` gives :class:`~tiermem.stores.protocol.MemoryStore` its
transcript methods (see :mod:`tiermem.stores.transcript`): each checks its arguments into
one op (a ``_..._op`` builder both forms share) and runs it with ``batch``, its
``a``-prefixed twin with ``abatch`` (natively async where the store reads so, e.g. on
PostgreSQL).
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import tiermem.stores.transcript as tr
from tiermem.errors import InputError, InvalidTypeError
from tiermem.stores.validate import (
    MAX_CONTENT_CHARS,
    append_op,
    check_limit,
    check_position,
    check_text_id,
    check_user_id,
)

if TYPE_CHECKING:
    from tiermem.messages import Message


class TranscriptAPI(ABC):
    """The transcript's methods, derived from :meth:`batch` and :meth:`abatch`."""

    @abstractmethod
    def batch(self, ops: Iterable[Any]) -> list[Any]:
        """Run ``ops`` in one transaction; one result per op, in order."""

    @abstractmethod
    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        """Async twin of :meth:`batch`."""

    # -- the ops, checked --

    def _transcript_op(
        self,
        user_id: str,
        session_id: str | None,
        any_session: bool,
        state: str | None,
        after: int,
        limit: int,
    ) -> tr.TranscriptOp:
        if state is not None and state not in tr.WORK_STATES:
            raise InputError(
                "state", f"{state!r} is not a work state", f"use one of {tr.WORK_STATES}"
            )
        return tr.TranscriptOp(
            check_user_id(user_id),
            check_text_id(session_id, "session_id"),
            bool(any_session),
            state,
            check_position(after),
            check_limit(limit),
        )

    def _recent_op(self, user_id: str, session_id: str | None, limit: int) -> tr.RecentOp:
        return tr.RecentOp(
            check_user_id(user_id), check_text_id(session_id, "session_id"), check_limit(limit)
        )

    def _users_op(self, limit: int, after: str) -> tr.UsersOp:
        if not isinstance(after, str):
            raise InvalidTypeError("after", f"must be a str, got {type(after).__name__}")
        return tr.UsersOp(check_limit(limit), after)

    def _forget_messages_op(self, user_id: str, message_ids: Sequence[str]) -> tr.ForgetMessagesOp:
        ids = tuple(check_text_id(m, "message_ids") or "" for m in message_ids)
        return tr.ForgetMessagesOp(check_user_id(user_id), ids)

    def _forget_session_op(self, user_id: str, session_id: str | None) -> tr.ForgetMessagesOp:
        return tr.ForgetMessagesOp(
            check_user_id(user_id), (), True, check_text_id(session_id, "session_id")
        )

    def _summary_op(self, user_id: str, session_id: str | None) -> tr.SummaryOp:
        return tr.SummaryOp(check_user_id(user_id), check_text_id(session_id, "session_id"))

    # -- sync --

    def append(
        self,
        user_id: str,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        agent_id: str | None = None,
        previous_id: str | None = None,
        max_chars: int = MAX_CONTENT_CHARS,
    ) -> int:
        """Append messages of a (user, session) to the transcript in one transaction.

        A worker embeds and indexes them later (see :mod:`tiermem.stores.transcript`);
        until then :meth:`unindexed` finds them. Returns how many were added: a message id
        the user already has is not added again.

        Args:
            previous_id: the id of the message before the first one (for context).
            max_chars: the longest line (speaker and text) accepted.
        """
        op = append_op(user_id, session_id, messages, agent_id, previous_id, max_chars)
        return cast(int, self.batch([op])[0])

    def recent(self, user_id: str, session_id: str | None, limit: int) -> builtins.list[Message]:
        """The newest ``limit`` messages of a (user, session), oldest first."""
        op = self._recent_op(user_id, session_id, limit)
        return cast(builtins.list["Message"], self.batch([op])[0])

    def transcript(
        self,
        user_id: str,
        *,
        session_id: str | None = None,
        any_session: bool = True,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> builtins.list[tr.TranscriptRow]:
        """A page of the user's transcript rows with ``seq`` above ``after``, in order.

        ``any_session=False`` keeps one session's (``session_id``, ``None`` for messages
        without one); ``state`` keeps ``pending``, ``done`` or ``failed`` rows.
        """
        op = self._transcript_op(user_id, session_id, any_session, state, after, limit)
        return cast(builtins.list[tr.TranscriptRow], self.batch([op])[0])

    def unindexed(self, user_id: str, limit: int = 500) -> builtins.list[tr.TranscriptRow]:
        """The user's newest messages not in the index yet (pending or failed)."""
        op = tr.UnindexedOp(check_user_id(user_id), check_limit(limit))
        return cast(builtins.list[tr.TranscriptRow], self.batch([op])[0])

    def sessions(self, user_id: str) -> builtins.list[tr.SessionInfo]:
        """The user's sessions, most recently active first."""
        op = tr.SessionsOp(check_user_id(user_id))
        return cast(builtins.list[tr.SessionInfo], self.batch([op])[0])

    def users(self, limit: int = 100, after: str = "") -> builtins.list[str]:
        """Admin (every user): the ids of the users with messages or memories, in
        order; pass the last id as ``after`` for the next page."""
        return cast(builtins.list[str], self.batch([self._users_op(limit, after)])[0])

    def failed(self, user_id: str, limit: int = 100) -> builtins.list[tr.TranscriptRow]:
        """The user's messages whose indexing failed, with the reason (``error``)."""
        return self.transcript(user_id, state="failed", limit=limit)

    def forget_messages(self, user_id: str, message_ids: Sequence[str]) -> int:
        """Delete the user's messages with these ids from the transcript (and their index
        rows, unless another message says the same); how many were deleted."""
        return cast(int, self.batch([self._forget_messages_op(user_id, message_ids)])[0])

    def forget_session(self, user_id: str, session_id: str | None) -> int:
        """Delete a session's messages and summary; how many messages were deleted."""
        return cast(int, self.batch([self._forget_session_op(user_id, session_id)])[0])

    def summary(self, user_id: str, session_id: str | None) -> tr.SessionSummary:
        """The running summary of a (user, session) and the transcript position it covers."""
        return cast(tr.SessionSummary, self.batch([self._summary_op(user_id, session_id)])[0])

    # -- async twins --

    async def aappend(
        self,
        user_id: str,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        agent_id: str | None = None,
        previous_id: str | None = None,
        max_chars: int = MAX_CONTENT_CHARS,
    ) -> int:
        """Async twin of :meth:`append`."""
        op = append_op(user_id, session_id, messages, agent_id, previous_id, max_chars)
        return cast(int, (await self.abatch([op]))[0])

    async def arecent(
        self, user_id: str, session_id: str | None, limit: int
    ) -> builtins.list[Message]:
        """Async twin of :meth:`recent`."""
        op = self._recent_op(user_id, session_id, limit)
        return cast(builtins.list["Message"], (await self.abatch([op]))[0])

    async def atranscript(
        self,
        user_id: str,
        *,
        session_id: str | None = None,
        any_session: bool = True,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> builtins.list[tr.TranscriptRow]:
        """Async twin of :meth:`transcript`."""
        op = self._transcript_op(user_id, session_id, any_session, state, after, limit)
        return cast(builtins.list[tr.TranscriptRow], (await self.abatch([op]))[0])

    async def aunindexed(self, user_id: str, limit: int = 500) -> builtins.list[tr.TranscriptRow]:
        """Async twin of :meth:`unindexed`."""
        op = tr.UnindexedOp(check_user_id(user_id), check_limit(limit))
        return cast(builtins.list[tr.TranscriptRow], (await self.abatch([op]))[0])

    async def asessions(self, user_id: str) -> builtins.list[tr.SessionInfo]:
        """Async twin of :meth:`sessions`."""
        op = tr.SessionsOp(check_user_id(user_id))
        return cast(builtins.list[tr.SessionInfo], (await self.abatch([op]))[0])

    async def ausers(self, limit: int = 100, after: str = "") -> builtins.list[str]:
        """Async twin of :meth:`users`."""
        return cast(builtins.list[str], (await self.abatch([self._users_op(limit, after)]))[0])

    async def afailed(self, user_id: str, limit: int = 100) -> builtins.list[tr.TranscriptRow]:
        """Async twin of :meth:`failed`."""
        return await self.atranscript(user_id, state="failed", limit=limit)

    async def aforget_messages(self, user_id: str, message_ids: Sequence[str]) -> int:
        """Async twin of :meth:`forget_messages`."""
        op = self._forget_messages_op(user_id, message_ids)
        return cast(int, (await self.abatch([op]))[0])

    async def aforget_session(self, user_id: str, session_id: str | None) -> int:
        """Async twin of :meth:`forget_session`."""
        op = self._forget_session_op(user_id, session_id)
        return cast(int, (await self.abatch([op]))[0])

    async def asummary(self, user_id: str, session_id: str | None) -> tr.SessionSummary:
        """Async twin of :meth:`summary`."""
        op = self._summary_op(user_id, session_id)
        return cast(tr.SessionSummary, (await self.abatch([op]))[0])
