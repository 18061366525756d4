"""The transcript, a part of every store: its methods, each with its async twin.

:class:`Transcript` is what a store holds as ``store.transcript`` (the tables are
described in :mod:`tiermem.stores.transcript`): each method checks its arguments into one
op (a ``_..._op`` builder) and is written once (:func:`~tiermem.aio.twins.stepped`): the
method runs the op with the store's ``batch``, its ``a``-prefixed twin with ``abatch``
(natively async where the store reads so, e.g. on PostgreSQL).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import tiermem.stores.transcript as tr
from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.errors import InputError, InvalidTypeError
from tiermem.stores.parts import Part
from tiermem.stores.validate import MAX_MESSAGE_CHARS, append_op, check_position
from tiermem.types.checks import check_limit, check_message_id, check_text_id, check_user_id
from tiermem.types.transcript import SessionInfo, TranscriptRow

if TYPE_CHECKING:
    from tiermem.messages import Message


class Transcript(Part):
    """Every message of every user, whole and in order: appended in one transaction,
    read back by session, by id or by page; erased by message or session."""

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

    # -- the methods, each run by batch and, as its twin, by abatch --

    @stepped
    def append(
        self,
        user_id: str,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        agent_id: str | None = None,
        previous_id: str | None = None,
        max_chars: int = MAX_MESSAGE_CHARS,
    ) -> Steps[int]:
        """Append messages of a (user, session) to the transcript in one transaction.

        A worker embeds and indexes them later (see :mod:`tiermem.stores.transcript`);
        until then :meth:`unindexed` finds them. Returns how many were added: a message id
        the user already has is not added again.

        Args:
            previous_id: the id of the message before the first one (for context).
            max_chars: the longest text of a message accepted.
        """
        return cast(
            int, (yield append_op(user_id, session_id, messages, agent_id, previous_id, max_chars))
        )

    aappend = stepped_twin(append)

    @stepped
    def recent(
        self, user_id: str, session_id: str | None, limit: int
    ) -> Steps[builtins.list[Message]]:
        """The newest ``limit`` messages of a (user, session), oldest first."""
        return cast(builtins.list["Message"], (yield self._recent_op(user_id, session_id, limit)))

    arecent = stepped_twin(recent)

    @stepped
    def message(self, user_id: str, message_id: str) -> Steps[Message | None]:
        """The user's message with this id, whole; None if the user has none."""
        op = tr.MessageOp(check_user_id(user_id), check_message_id(message_id))
        return cast("Message | None", (yield op))

    amessage = stepped_twin(message)

    @stepped
    def rows(
        self,
        user_id: str,
        *,
        session_id: str | None = None,
        any_session: bool = True,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> Steps[builtins.list[TranscriptRow]]:
        """A page of the user's transcript rows with ``seq`` above ``after``, in order.

        ``any_session=False`` keeps one session's (``session_id``, ``None`` for messages
        without one); ``state`` keeps ``pending``, ``done`` or ``failed`` rows.
        """
        op = self._transcript_op(user_id, session_id, any_session, state, after, limit)
        return cast(builtins.list[TranscriptRow], (yield op))

    arows = stepped_twin(rows)

    @stepped
    def unindexed(self, user_id: str, limit: int = 500) -> Steps[builtins.list[TranscriptRow]]:
        """The user's newest messages not in the index yet (pending or failed)."""
        return cast(
            builtins.list[TranscriptRow],
            (yield tr.UnindexedOp(check_user_id(user_id), check_limit(limit))),
        )

    aunindexed = stepped_twin(unindexed)

    @stepped
    def sessions(self, user_id: str) -> Steps[builtins.list[SessionInfo]]:
        """The user's sessions, most recently active first."""
        return cast(builtins.list[SessionInfo], (yield tr.SessionsOp(check_user_id(user_id))))

    asessions = stepped_twin(sessions)

    @stepped
    def users(self, limit: int = 100, after: str = "") -> Steps[builtins.list[str]]:
        """Admin (every user): the ids of the users with messages or memories, in
        order; pass the last id as ``after`` for the next page."""
        return cast(builtins.list[str], (yield self._users_op(limit, after)))

    ausers = stepped_twin(users)

    @stepped
    def failed(self, user_id: str, limit: int = 100) -> Steps[builtins.list[TranscriptRow]]:
        """The user's messages whose indexing failed, with the reason (``error``)."""
        return cast(
            builtins.list[TranscriptRow],
            (yield self._transcript_op(user_id, None, True, "failed", 0, limit)),
        )

    afailed = stepped_twin(failed)

    @stepped
    def forget_messages(self, user_id: str, message_ids: Sequence[str]) -> Steps[int]:
        """Delete the user's messages with these ids from the transcript (and their index
        rows, unless another message says the same); how many were deleted."""
        return cast(int, (yield self._forget_messages_op(user_id, message_ids)))

    aforget_messages = stepped_twin(forget_messages)

    @stepped
    def forget_session(self, user_id: str, session_id: str | None) -> Steps[int]:
        """Delete a session's messages and summary; how many messages were deleted."""
        return cast(int, (yield self._forget_session_op(user_id, session_id)))

    aforget_session = stepped_twin(forget_session)

    @stepped
    def summary(self, user_id: str, session_id: str | None) -> Steps[tr.SessionSummary]:
        """The running summary of a (user, session) and the transcript position it covers."""
        return cast(tr.SessionSummary, (yield self._summary_op(user_id, session_id)))

    asummary = stepped_twin(summary)
