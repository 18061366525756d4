"""ConversationMemory and MemoryManager (seed 004, MARSYS).

:class:`ConversationMemory` is one agent's conversation: messages in order, never edited
once added, optionally windowed with a running summary of what left the window (it is a
:class:`~tiermem.buffer.memory.BufferMemory` underneath, so eviction keeps tool calls with their
results and summarizes off the append path).

:class:`MemoryManager` hands out one conversation per agent and applies a retention
policy: ``single_run`` clears them, ``session`` keeps them for the life of the process,
``persistent`` saves them to the long-term store (see :mod:`tiermem.patterns.persistence`)
and restores them in a later process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tiermem.aio.twins import stepped_twin
from tiermem.buffer.memory import BufferMemory
from tiermem.errors import ConfigError, InputError, InvalidSizeError, InvalidTypeError
from tiermem.messages import Message, summary_message
from tiermem.summaries.summarize import ExtractiveSummarizer
from tiermem.tokens import TokenCounter

if TYPE_CHECKING:
    from tiermem.api import MemoryAPI
    from tiermem.patterns.persistence import ConversationStore

RETENTION_POLICIES = ("single_run", "session", "persistent")
DEFAULT_AGENT = "default"
"""The agent name of :attr:`MemoryManager.memory` (the seed's manager-level memory)."""


def check_message(message: Any, field: str = "message") -> Message:
    """``message`` if it is a :class:`Message`, else a typed error naming ``field``."""
    if not isinstance(message, Message):
        raise InvalidTypeError(
            field,
            f"expected a tiermem Message, got {type(message).__name__}",
            "build one with Message(role=..., content=...)",
        )
    return message


def check_name(value: Any, field: str) -> str:
    """A non-empty string (agent names, user ids)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidTypeError(field, f"expected a non-empty str, got {value!r}")
    return value


class ConversationMemory:
    """The messages of one conversation, oldest first (seed 004's ``ConversationMemory``).

    Messages are immutable once added: there is no call that edits or removes one
    message, and adding a second message with an id already present raises.

    Args:
        max_messages: messages kept; older ones leave the memory (None: no limit).
        summarizer: summarizes the messages that leave, into :attr:`summary`, which
            :meth:`to_llm_format` puts first. Any :class:`~tiermem.summaries.summarize.Summarizer`.
        token_counter: used by the summarizer pipeline and token helpers.
    """

    def __init__(
        self,
        max_messages: int | None = None,
        summarizer: Any = None,
        *,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self._buffer = BufferMemory(
            buffer_size=max_messages, summarizer=summarizer, token_counter=token_counter
        )
        self._index: dict[str, Message] = {}
        self._lock = threading.RLock()
        self._buffer.add_eviction_consumer(self._forget_evicted)

    def _forget_evicted(self, messages: list[Message]) -> None:
        for message in messages:
            self._index.pop(message.message_id, None)

    # -- writing -----------------------------------------------------------------------

    def add_message(self, message: Message) -> None:
        """Append ``message``; raises if its ``message_id`` is already in this memory."""
        check_message(message)
        with self._lock:
            if message.message_id in self._index:
                raise InputError(
                    "message.message_id",
                    f"{message.message_id!r} is already in this memory",
                    "messages are immutable once added; add a new Message instead",
                )
            self._index[message.message_id] = message
            self._buffer.add(message)

    aadd_message = stepped_twin(add_message)  # in memory: runs at once

    def clear(self) -> None:
        """Remove every message and the summary."""
        with self._lock:
            self._buffer.clear()
            self._index.clear()

    # -- reading -----------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The messages, oldest first (a copy of the list)."""
        return self._buffer.messages

    @property
    def message_index(self) -> Mapping[str, Message]:
        """Read-only view of the messages by ``message_id``."""
        return MappingProxyType(self._index)

    @property
    def summary(self) -> str | None:
        """Summary of every message that left the window (None if none left or no
        summarizer); waits for the summarizer to take in the latest evictions."""
        self._buffer.flush()
        return self._buffer.summary

    @summary.setter
    def summary(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise InvalidTypeError("summary", f"expected str or None, got {type(value).__name__}")
        self._buffer.summary = value

    @property
    def max_messages(self) -> int | None:
        """The window, or None."""
        return self._buffer.buffer_size

    @property
    def buffer(self) -> BufferMemory:
        """The underlying buffer (eviction consumers, token counts, summaries ring)."""
        return self._buffer

    def get_messages(self) -> list[Message]:
        """All messages in chronological order (a copy)."""
        return self._buffer.messages

    def get_recent(self, n: int) -> list[Message]:
        """The last ``n`` messages, oldest first; ``[]`` when ``n <= 0``."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise InvalidTypeError("n", f"expected an int, got {type(n).__name__}")
        return self._buffer.get_recent(n) if n > 0 else []

    def get(self, message_id: str) -> Message | None:
        """The message with this id, or None."""
        return self._index.get(message_id)

    def to_llm_format(self) -> list[dict[str, Any]]:
        """OpenAI chat messages, the summary first (seed 004's role mapping:
        ``agent_call`` becomes a user message prefixed with its caller, ``agent_response``
        an assistant message, tool results keep their ``tool_call_id``)."""
        formatted = [m.to_openai() for m in self._buffer.messages]
        summary = self.summary
        return [summary_message(summary), *formatted] if summary else formatted

    def __len__(self) -> int:
        return len(self._buffer)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._buffer.messages)

    def __repr__(self) -> str:
        return f"ConversationMemory(messages={len(self)}, max_messages={self.max_messages})"


class MemoryManager:
    """One :class:`ConversationMemory` per agent, under a retention policy (seed 004).

    Args:
        retention_policy: ``"single_run"`` (cleared by :meth:`apply_retention_policy`),
            ``"session"`` (kept while the process runs) or ``"persistent"`` (saved to the
            long-term store by :meth:`apply_retention_policy` and restored by
            :meth:`get_memory` in any later process using the same store).
        max_messages: messages each conversation keeps; older ones leave it.
        auto_summarize: summarize the messages that leave instead of dropping them.
        summarize_threshold: with ``auto_summarize``, a conversation keeps at most this
            many messages verbatim; older ones are folded into its summary.
        summarizer: the summarizer (default: the offline extractive one).
        memory: where ``persistent`` keeps the conversations (a :class:`~tiermem.Memory`
            or a client); default ``Memory(path)``, created on first use and closed by
            :meth:`close`.
        path: SQLite file of that default Memory.
        user_id: owner of the persisted conversations (isolation in the store).
    """

    def __init__(
        self,
        retention_policy: str = "session",
        max_messages: int | None = None,
        auto_summarize: bool = False,
        summarize_threshold: int = 100,
        *,
        summarizer: Any = None,
        memory: MemoryAPI | None = None,
        path: str | None = None,
        user_id: str = "default",
    ) -> None:
        if retention_policy not in RETENTION_POLICIES:
            raise ConfigError(
                "retention_policy",
                f"unknown policy {retention_policy!r}",
                f"use one of {', '.join(RETENTION_POLICIES)}",
            )
        for name, value in (
            ("max_messages", max_messages),
            ("summarize_threshold", summarize_threshold),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidSizeError(name, f"must be an int >= 1, got {value!r}")
        if not isinstance(auto_summarize, bool):
            raise InvalidTypeError("auto_summarize", f"expected a bool, got {auto_summarize!r}")
        self.retention_policy = retention_policy
        self.max_messages = max_messages
        self.auto_summarize = auto_summarize
        self.summarize_threshold = summarize_threshold
        self.user_id = check_name(user_id, "user_id")
        self._summarizer = (
            summarizer
            if summarizer is not None
            else (ExtractiveSummarizer() if auto_summarize else None)
        )
        self._memory = memory
        self._owns_memory = memory is None
        self._path = path
        self._store: ConversationStore | None = None
        self._agents: dict[str, ConversationMemory] = {}
        self._lock = threading.RLock()

    # -- conversations -----------------------------------------------------------------

    @property
    def window(self) -> int | None:
        """Messages each conversation keeps verbatim."""
        if not self.auto_summarize:
            return self.max_messages
        return min(self.max_messages or self.summarize_threshold, self.summarize_threshold)

    def _new_conversation(self) -> ConversationMemory:
        return ConversationMemory(self.window, self._summarizer if self.auto_summarize else None)

    def get_memory(self, agent_name: str) -> ConversationMemory:
        """The conversation of ``agent_name``, created (or restored, when persistent) once."""
        check_name(agent_name, "agent_name")
        with self._lock:
            conversation = self._agents.get(agent_name)
            if conversation is None:
                conversation = self._new_conversation()
                if self.retention_policy == "persistent":
                    self.persistence.restore(agent_name, conversation)
                self._agents[agent_name] = conversation
            return conversation

    @property
    def memory(self) -> ConversationMemory:
        """The manager-level conversation of the seed (agent name ``"default"``)."""
        return self.get_memory(DEFAULT_AGENT)

    @property
    def agent_memories(self) -> dict[str, ConversationMemory]:
        """The conversations created or restored so far, by agent name (a copy)."""
        with self._lock:
            return dict(self._agents)

    # -- retention ---------------------------------------------------------------------

    def apply_retention_policy(self) -> None:
        """End of a run: ``single_run`` clears every conversation, ``session`` keeps them,
        ``persistent`` saves them to the long-term store."""
        if self.retention_policy == "single_run":
            for conversation in self.agent_memories.values():
                conversation.clear()
        elif self.retention_policy == "persistent":
            self.save()

    def save(self) -> int:
        """Write every conversation to the long-term store now; returns messages written.

        Raises:
            ConfigError: the policy is not ``persistent``.
        """
        if self.retention_policy != "persistent":
            raise ConfigError(
                "retention_policy",
                f"is {self.retention_policy!r}; only 'persistent' conversations are saved",
                "create the manager with retention_policy='persistent'",
            )
        return sum(
            self.persistence.save(name, conversation)
            for name, conversation in self.agent_memories.items()
        )

    save_to_disk = save

    def forget(self, agent_name: str) -> int:
        """Drop the conversation of ``agent_name``, and its saved copy when persistent.

        Returns the number of stored records deleted.
        """
        check_name(agent_name, "agent_name")
        with self._lock:
            self._agents.pop(agent_name, None)
        if self.retention_policy != "persistent":
            return 0
        return self.persistence.forget(agent_name)

    @property
    def persistence(self) -> ConversationStore:
        """The long-term copy of the conversations (built on first use)."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    from tiermem.patterns.persistence import ConversationStore

                    if self._memory is None:
                        from tiermem.memory import Memory

                        self._memory = Memory(self._path)
                    self._store = ConversationStore(self._memory, self.user_id)
        return self._store

    def close(self) -> None:
        """Save (when persistent) and release the store of a Memory this manager created."""
        if self.retention_policy == "persistent" and self._agents:
            self.save()
        if self._owns_memory and self._memory is not None:
            self._memory.close()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"MemoryManager(retention_policy={self.retention_policy!r}, "
            f"agents={sorted(self._agents)})"
        )


__all__ = [
    "DEFAULT_AGENT",
    "RETENTION_POLICIES",
    "ConversationMemory",
    "MemoryManager",
]
