"""ConversationStore: saves agents' conversations to the long-term store and restores them.

Used by :class:`~tiermem.patterns.MemoryManager` with ``retention_policy="persistent"``.
Each agent's conversation is kept in the user's ``memories`` table as:

* one row per message (``memory_type`` ``message`` or ``tool``, ``agent_id`` the agent),
  whose content ``[agent #position] role: text`` is embedded and keyword-indexed like any
  memory, so :meth:`tiermem.Memory.search` finds what was said; the message itself
  (tool calls, ids, timestamps...) is in ``metadata.message`` and comes back unchanged;
* one state row (``memory_type`` ``context``) holding the ids of the messages currently
  in the conversation window and its running summary.

Rows are append-only: a message that left the window (or was cleared) stays in
long-term memory; only the state row is updated. Everything goes through the public
contract (:class:`~tiermem.api.MemoryAPI`), so a :class:`~tiermem.client.MemoryClient`
works as well as a :class:`~tiermem.Memory`.

A save writes the new message rows in one transaction (:meth:`~tiermem.Memory.remember_many`)
and then the state row, the save's commit point. Nothing is lost or duplicated when it
fails: before the state is written, the bookkeeping of what was saved is unchanged, so the
next save writes the same rows at the same positions again, and the store gives back the
existing ids (one memory per content). A process that dies between the two writes leaves
the previous state; the rows it wrote stay in long-term memory, and :meth:`restore` numbers
new messages after them.
"""

from __future__ import annotations

import builtins
import logging
import threading
from datetime import timezone
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from tiermem.messages import Message, transcript_line
from tiermem.types.checks import MAX_LIMIT
from tiermem.types.records import MemoryRecord

if TYPE_CHECKING:
    from tiermem.api import MemoryAPI
    from tiermem.buffer.memory import BufferMemory

log = logging.getLogger(__name__)

MESSAGE_KIND = "conversation"
STATE_KIND = "conversation_state"
_PAGE = 500


class Conversation(Protocol):
    """What is saved and restored: a :class:`~tiermem.patterns.ConversationMemory`'s
    window, summary and buffer."""

    summary: str | None

    @property
    def messages(self) -> list[Message]: ...

    @property
    def buffer(self) -> BufferMemory: ...

    def add_message(self, message: Message) -> None: ...

    def clear(self) -> None: ...

    def __len__(self) -> int: ...


class _Agent:
    """What is known about one agent's saved conversation."""

    def __init__(self) -> None:
        self.saved: set[str] = set()
        """Ids of window messages already stored."""
        self.evicted: list[Message] = []
        """Messages that left the window before they were stored."""
        self.next_position = 0
        self.state_id: str | None = None
        self.last_state: tuple[tuple[str, ...], str | None] | None = None


class ConversationStore:
    """The long-term copy of one user's agent conversations.

    Args:
        memory: where the rows are kept (a :class:`~tiermem.Memory` or a client).
        user_id: owner of every row written (store-level isolation).
    """

    def __init__(self, memory: MemoryAPI, user_id: str) -> None:
        self.memory = memory
        self.user_id = user_id
        self._agents: dict[str, _Agent] = {}
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()

    def _agent(self, name: str) -> _Agent:
        with self._lock:
            return self._agents.setdefault(name, _Agent())

    # -- restore -----------------------------------------------------------------------

    def restore(self, agent: str, conversation: Conversation) -> int:
        """Load the saved window and summary of ``agent`` into ``conversation`` (empty);
        returns the messages restored. Starts tracking what leaves its window."""
        state = self._agent(agent)
        rows = self._list(agent, STATE_KIND, "context", limit=1)
        if rows:
            meta = rows[0].metadata
            window = [str(i) for i in meta.get("window", [])]
            found = self._find_messages(agent, set(window))
            missing = [i for i in window if i not in found]
            if missing:
                log.warning(
                    "%d saved messages of %r are missing from the store", len(missing), agent
                )
            for message_id in window:
                if message_id in found:
                    conversation.add_message(found[message_id])
            conversation.summary = meta.get("summary")
            state.state_id = str(rows[0].id)
            state.next_position = int(meta.get("next", 0))
            state.saved = set(found)
            state.last_state = (tuple(window), meta.get("summary"))
        state.next_position = self._free_position(agent, state.next_position)
        conversation.buffer.add_eviction_consumer(partial(self._on_evict, state))
        return len(conversation)

    def _on_evict(self, state: _Agent, messages: builtins.list[Message]) -> None:
        with self._lock:
            for message in messages:
                if message.message_id in state.saved:
                    state.saved.discard(message.message_id)
                else:
                    state.evicted.append(message)

    def _find_messages(self, agent: str, wanted: set[str]) -> dict[str, Message]:
        """The stored messages with these ids (newest rows first, stops when all found)."""
        found: dict[str, Message] = {}
        offset = 0
        while len(found) < len(wanted):
            page = self._list(agent, MESSAGE_KIND, ["message", "tool"], _PAGE, offset)
            for record in page:
                data = record.metadata.get("message")
                if isinstance(data, dict) and data.get("message_id") in wanted:
                    found[data["message_id"]] = Message.from_dict(data)
            if len(page) < _PAGE:
                break
            offset += _PAGE
        return found

    def _free_position(self, agent: str, position: int) -> int:
        """The first position from ``position`` on that no stored message row has (rows
        of a save whose state was never written are skipped, not written over)."""
        while self._list(agent, MESSAGE_KIND, ["message", "tool"], 1, position=position):
            position += 1
        return position

    def _list(
        self,
        agent: str,
        kind: str,
        memory_type: Any,
        limit: int,
        offset: int = 0,
        **metadata: Any,
    ) -> builtins.list[MemoryRecord]:
        return self.memory.list_memories(
            self.user_id,
            limit=limit,
            offset=offset,
            agent_id=agent,
            memory_type=memory_type,
            metadata={"kind": kind, **metadata},
        )

    # -- save --------------------------------------------------------------------------

    def save(self, agent: str, conversation: Conversation) -> int:
        """Store the messages of ``agent`` not stored yet, then its current state; returns
        how many messages were written (see the module's notes on failures).

        Appends to the conversation never wait on a save: its bookkeeping lock is only
        held for list operations, and the save itself is serialized by another lock.
        """
        state = self._agent(agent)
        with self._save_lock:
            window = conversation.messages
            summary = conversation.summary
            ids = tuple(m.message_id for m in window)
            with self._lock:
                taken = len(state.evicted)
                pending = state.evicted + [m for m in window if m.message_id not in state.saved]
                new = list({m.message_id: m for m in pending}.values())
            if not new and state.last_state == (ids, summary):
                return 0
            rows = [self._message_row(agent, state.next_position + i, m) for i, m in enumerate(new)]
            next_position = state.next_position + len(new)
            state_row = self._state_row(agent, ids, summary, next_position)
            state_id = state.state_id
            if state_id is None:  # the first save: rows and state in one transaction
                state_id = self.memory.remember_many([*rows, state_row], self.user_id)[-1]
            else:
                if rows:
                    self.memory.remember_many(rows, self.user_id)
                self.memory.update_memory(
                    state_id,
                    self.user_id,
                    content=state_row["content"],
                    metadata=state_row["metadata"],
                )
            written = {m.message_id for m in new}
            with self._lock:
                state.state_id = state_id
                later = state.evicted[taken:]
                state.evicted = [m for m in later if m.message_id not in written]
                state.saved |= set(ids) - {m.message_id for m in later}
                state.next_position = next_position
                state.last_state = (ids, summary)
            return len(rows)

    def _message_row(self, agent: str, position: int, message: Message) -> dict[str, Any]:
        timestamp = message.timestamp
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=timezone.utc)
        session_id = message.metadata.get("session_id")
        return {
            "content": f"[{agent} #{position}] {transcript_line(message)}",
            "memory_type": "tool" if message.role == "tool" else "message",
            "agent_id": agent,
            "session_id": session_id if isinstance(session_id, str) else None,
            "importance": 0.3,
            "metadata": {
                "kind": MESSAGE_KIND,
                "position": position,
                "message_id": message.message_id,
                "message": message.to_dict(),
            },
            "created_at": timestamp,
        }

    def _state_row(
        self, agent: str, window: tuple[str, ...], summary: str | None, next_position: int
    ) -> dict[str, Any]:
        text = f"summary: {summary}" if summary else "no summary yet"
        return {
            "content": f"[{agent} conversation state] {text}",
            "memory_type": "context",
            "agent_id": agent,
            "importance": 0.5,
            "metadata": {
                "kind": STATE_KIND,
                "window": list(window),
                "summary": summary,
                "next": next_position,
            },
        }

    # -- forget ------------------------------------------------------------------------

    def forget(self, agent: str) -> int:
        """Delete every stored row of ``agent``'s conversation; returns how many."""
        with self._save_lock, self._lock:
            self._agents.pop(agent, None)
        deleted = 0
        for kind, types in ((MESSAGE_KIND, ["message", "tool"]), (STATE_KIND, "context")):
            while True:
                page = self._list(agent, kind, types, MAX_LIMIT)
                if not page:
                    break
                deleted += sum(self.memory.forget(str(r.id), self.user_id) for r in page)
        return deleted


__all__ = ["ConversationStore"]
