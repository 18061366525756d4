"""Short-term memory: recent messages with count and token windows.

:class:`BufferMemory` (seeds 000 and 001) and :class:`ConversationBuffer` (seed 003) are
built on one core, :class:`~tiermem.buffer.ring.RingBuffer` (O(1) append, eviction consumers that
see every message that leaves, tool calls kept with their results); :class:`BufferRegistry`
keeps one buffer per user and session.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any

from tiermem.aio.twins import twin
from tiermem.buffer.ring import EvictionConsumer, RingBuffer, check_size
from tiermem.errors import (
    InvalidRoleError,
    InvalidSizeError,
    InvalidTypeError,
    MissingUserError,
    SerializationError,
)
from tiermem.messages import (
    ROLES,
    Content,
    Message,
    check_fields,
    copy_json,
    messages_from_dicts,
    parse_json,
    summary_message,
)
from tiermem.summaries.summarize import ExtractiveSummarizer
from tiermem.summaries.worker import SummaryPipeline, SummaryPolicy
from tiermem.tokens import TokenCounter, newest_within

SERIAL_VERSION = 1
_PLAIN_ROLES = ROLES - {"tool"}


class BufferMemory(RingBuffer[Message]):
    """Recent messages of one conversation, with a running summary of what left.

    Args:
        buffer_size: messages kept (count window); None for no count limit.
        max_tokens: tokens kept (token window), counted with ``token_counter``.
        summarizer: summarizes evicted messages (see :mod:`tiermem.summaries.summarize`), in
            batches, off the append path (see :mod:`tiermem.summaries.worker`).
        multiplier: the ``summaries`` ring holds ``buffer_size * multiplier`` entries.
        token_counter: defaults to the exact o200k_base counter.
        size: seed 001's name for ``buffer_size``.
        summary_policy: batching, background/sync mode, retries and fallback of the
            summarizer; default batches of ``min(10, buffer_size)`` in the background.
    """

    def __init__(
        self,
        buffer_size: int | None = 50,
        max_tokens: int | None = None,
        summarizer: Any = None,
        multiplier: int = 10,
        *,
        token_counter: TokenCounter | None = None,
        size: int | None = None,
        summary_policy: SummaryPolicy | None = None,
    ) -> None:
        if size is not None:
            buffer_size = size
        self.buffer_size = check_size("buffer_size", buffer_size)
        if isinstance(multiplier, bool) or not isinstance(multiplier, int) or multiplier < 1:
            raise InvalidSizeError("multiplier", f"must be an int >= 1, got {multiplier!r}")
        super().__init__(self.buffer_size, max_tokens, token_counter)
        self.multiplier = multiplier
        self.summarizer = summarizer
        self._summary: str | None = None
        self.summaries: deque[str] = deque(maxlen=(self.buffer_size or 50) * multiplier)
        self._vectors: dict[str, Any] = {}  # message_id -> vector, for vector_search
        """One entry per summarized batch, newest last."""
        self.summarization: SummaryPipeline | None = None
        """Feeds evicted messages to ``summarizer`` in batches; None without a summarizer."""
        if summarizer is not None:
            policy = summary_policy or SummaryPolicy(batch_size=min(10, self.buffer_size or 10))
            self.summarization = SummaryPipeline(
                summarizer, self._apply_summary, lambda: self._summary, policy
            )
            self.add_eviction_consumer(self.summarization)

    @property
    def summary(self) -> str | None:
        """The running summary of what left the window.

        Batches of evicted messages waiting for the summarizer are waited for a short
        while (``summary_policy.read_wait``, 2 s by default) while it is healthy, so an
        offline summarizer or a model that answers gives the summary with them (as the
        seed's, which summarized inside ``add_message``). A summarizer that failed, or
        was that slow for the last read, is not waited for: the summary as it stands,
        what is not in it yet counted in :attr:`pending_messages`. :meth:`flush` waits
        for everything, the incomplete batch included.
        """
        self._settle()
        return self._summary

    @summary.setter
    def summary(self, value: str | None) -> None:
        self._summary = value

    @property
    def summary_now(self) -> str | None:
        """The running summary as it stands, never waiting (what a context reads)."""
        return self._summary

    def _settle(self) -> None:
        """Wait briefly for the queued summary batches (:meth:`SummaryPipeline.settle`)."""
        if self.summarization is not None:
            self.summarization.settle()

    def _apply_summary(self, entry: str, running: str) -> None:
        self.summaries.append(entry)
        self._summary = running

    @property
    def pending_messages(self) -> int:
        """Evicted messages not in :attr:`summary` yet (0 without a summarizer)."""
        return 0 if self.summarization is None else self.summarization.pending_messages

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every evicted message is in the summary; False on timeout."""
        return self.summarization is None or self.summarization.flush(timeout)

    aflush = twin(flush)

    @property
    def size(self) -> int | None:
        """Seed 001's name for ``buffer_size``."""
        return self.buffer_size

    @property
    def max_tokens(self) -> int | None:
        """The token window, if any."""
        return self._max_tokens

    @staticmethod
    def _call_ids(item: Message) -> list[str] | None:
        calls = item.tool_calls
        return [c["id"] for c in calls] if calls else None

    @staticmethod
    def _answers(item: Message) -> str | None:
        return item.tool_call_id if item.role == "tool" else None

    @staticmethod
    def _as_message(item: Message) -> Message:
        return item

    # -- writing --------------------------------------------------------------------

    def add_message(
        self,
        role: str,
        content: Content,
        metadata: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Message:
        """Append a message (seed 000) and return it; other Message fields go in ``fields``."""
        check_fields(fields)
        if metadata is None:
            message = Message(role, content, **fields)
        else:
            message = Message(role, content, metadata=metadata, **fields)
        self.add(message)
        return message

    def add(self, message: Message) -> None:
        """Append an existing :class:`Message`."""
        if type(message) is not Message:
            raise InvalidTypeError(
                "message", f"expected a Message, got {type(message).__name__}", "use add_message"
            )
        self._append(message, not message.tool_calls and message.role != "tool")

    def extend(self, messages: Iterable[Message]) -> None:
        """Append several messages in order (validated before any is added)."""
        batch = list(messages)
        for i, message in enumerate(batch):
            if type(message) is not Message:
                raise InvalidTypeError(f"messages[{i}]", f"expected a Message, got {message!r}")
        self._push_all(batch)

    async def aadd_message(
        self, role: str, content: Content, metadata: dict[str, Any] | None = None, **fields: Any
    ) -> Message:
        """:meth:`add_message` under the buffer's asyncio lock."""
        async with self._async_lock():
            return self.add_message(role, content, metadata, **fields)

    def clear(self) -> None:
        """Remove all messages and summaries (not an eviction: consumers are not called)."""
        with self._lock:
            self._reset()
            self._summary = None
            self.summaries.clear()
            if self.summarization is not None:
                self.summarization.clear()

    # -- reading --------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The messages in the window, oldest first (a copy)."""
        return self._snapshot()

    def get_messages(self, filter_metadata: Mapping[str, Any] | None = None) -> list[Message]:
        """Messages in the window, optionally only those whose metadata has these values."""
        messages = self._snapshot()
        if not filter_metadata:
            return messages
        if not isinstance(filter_metadata, Mapping):
            raise InvalidTypeError("filter_metadata", "expected a dict")
        wanted = list(filter_metadata.items())
        return [m for m in messages if all(m.metadata.get(k) == v for k, v in wanted)]

    def get_recent(self, n: int = 10) -> list[Message]:
        """The ``n`` newest messages, oldest first; O(n)."""
        return self._recent(n)

    def get_formatted_messages(self) -> list[dict[str, Any]]:
        """OpenAI-format messages, the summary first as a system message (seed 000)."""
        self._settle()
        with self._lock:
            messages = list(self._items)
            summary = self._summary
        formatted = [m.to_openai() for m in messages]
        if summary:
            formatted.insert(0, summary_message(summary))
        return formatted

    def get_context(self, max_tokens: int | None = None) -> list[dict[str, Any]]:
        """Formatted messages with the summary, newest kept within ``max_tokens`` if given.

        Trimming never separates a tool call from its results; the summary is kept first
        while it fits.
        """
        limit = check_size("max_tokens", max_tokens)
        if limit is None:
            return self.get_formatted_messages()
        self._settle()
        with self._lock:
            messages = list(self._items)
            summary = self._summary
        counter = self.token_counter
        head = [summary_message(summary)] if summary else []
        budget = limit - sum(counter.count_message(Message.from_openai(h)) for h in head)
        if budget < 0:
            head, budget = [], limit
        return head + [m.to_openai() for m in newest_within(messages, counter, budget)]

    def vector_search(
        self, query: Any, embedder: Any, k: int = 5, only: Container[str] | None = None
    ) -> list[tuple[Message, float]]:
        """The ``k`` messages most similar to ``query`` (text or vector), with cosine scores.

        Each message is embedded once, when first searched, and its vector kept while it
        is in the window; the planner uses this for messages not yet in long-term memory
        (``only``: the ids of those messages; None searches every message).
        """
        import numpy as np

        with self._lock:
            messages = [
                m for m in self._items if m.text.strip() and (only is None or m.message_id in only)
            ]
            vectors = dict(self._vectors)
        if not messages or k <= 0:
            return []
        vector = embedder.embed([query])[0] if isinstance(query, str) else np.asarray(query)
        missing = [m for m in messages if m.message_id not in vectors]
        if missing:
            fresh = embedder.embed([m.text for m in missing])
            vectors.update(zip((m.message_id for m in missing), fresh, strict=True))
        with self._lock:
            present = {m.message_id for m in self._items}
            self._vectors = {i: v for i, v in vectors.items() if i in present}
        matrix = np.stack([vectors[m.message_id] for m in messages])
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        best = np.argsort(-scores)[:k]
        return [(messages[i], float(scores[i])) for i in best]

    # -- serialization ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible copy of the buffer: settings, summaries and messages."""
        with self._lock:
            return {
                "version": SERIAL_VERSION,
                "buffer_size": self.buffer_size,
                "max_tokens": self._max_tokens,
                "multiplier": self.multiplier,
                "summary": self._summary,
                "summaries": list(self.summaries),
                "messages": [m.to_dict() for m in self._items],
                "pending_summaries": self.summarization.to_dict() if self.summarization else None,
            }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        summarizer: Any = None,
        token_counter: TokenCounter | None = None,
        on_evict: EvictionConsumer | None = None,
        summary_policy: SummaryPolicy | None = None,
    ) -> BufferMemory:
        """Rebuild a buffer from :meth:`to_dict` (or seed 000's JSON shape).

        The window is honoured: messages beyond it are evicted, to ``on_evict`` if given.
        Pending summary batches are queued again (with the offline extractive summarizer
        when no ``summarizer`` is given), so nothing evicted before the save is lost.

        Raises:
            SerializationError: the data is not a buffer dict; names the bad field.
        """
        if not isinstance(data, Mapping):
            raise SerializationError("buffer", f"expected a dict, got {type(data).__name__}")
        raw = data.get("messages", [])
        if not isinstance(raw, list):
            raise SerializationError("messages", "expected a list of message dicts")
        messages = messages_from_dicts(raw)
        summaries = data.get("summaries") or []
        summary = data.get("summary")
        if not isinstance(summaries, list) or not all(isinstance(s, str) for s in summaries):
            raise SerializationError("summaries", "expected a list of strings")
        if summary is not None and not isinstance(summary, str):
            raise SerializationError("summary", "expected a string or null")
        pending = data.get("pending_summaries")
        if pending and summarizer is None:
            summarizer = ExtractiveSummarizer()
        try:
            buffer = cls(
                buffer_size=data.get("buffer_size", 50),
                max_tokens=data.get("max_tokens"),
                multiplier=data.get("multiplier", 10),
                summarizer=summarizer,
                token_counter=token_counter,
                summary_policy=summary_policy,
            )
        except (InvalidSizeError, InvalidTypeError) as exc:
            raise SerializationError(exc.field, exc.problem, exc.hint) from None
        buffer.summary = summary
        buffer.summaries.extend(summaries)
        if pending and buffer.summarization is not None:
            buffer.summarization.restore(pending)
        if on_evict is not None:
            buffer.add_eviction_consumer(on_evict)
        buffer.extend(messages)
        return buffer

    def to_json(self) -> str:
        """Serialize to JSON (see :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, json_data: str | bytes, **options: Any) -> BufferMemory:
        """Rebuild a buffer from :meth:`to_json`; options as :meth:`from_dict`."""
        return cls.from_dict(parse_json(json_data, "buffer"), **options)

    def __repr__(self) -> str:
        return (
            f"BufferMemory(messages={len(self)}, buffer_size={self.buffer_size}, "
            f"max_tokens={self._max_tokens})"
        )


class ConversationBuffer(RingBuffer[dict[str, Any]]):
    """Seed 003's rolling window of message dicts (promptise's API), on the shared core.

    Args:
        max_messages: messages kept; 0 disables buffering (every message is evicted at
            once), None keeps everything.
        enabled: False also disables buffering.
        max_tokens: an optional token window on top of the count window.
        token_counter: counter for the token window.
    """

    def __init__(
        self,
        max_messages: int | None = 100,
        enabled: bool = True,
        *,
        max_tokens: int | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.max_messages = check_size("max_messages", max_messages, allow_zero=True)
        self.enabled = bool(enabled)
        limit = self.max_messages if self.enabled else 0
        super().__init__(limit, max_tokens, token_counter)

    @staticmethod
    def _call_ids(item: dict[str, Any]) -> list[str] | None:
        calls = item.get("tool_calls")
        return [c["id"] for c in calls if isinstance(c, dict) and "id" in c] if calls else None

    @staticmethod
    def _answers(item: dict[str, Any]) -> str | None:
        return item.get("tool_call_id") if item.get("role") == "tool" else None

    @staticmethod
    def _as_message(item: dict[str, Any]) -> Message:
        return Message.from_openai(item)

    @staticmethod
    def _check(message: Any, field: str = "message") -> dict[str, Any]:
        checked: dict[str, Any]
        if type(message) is dict:
            checked = message
        else:
            if not isinstance(message, Mapping):
                raise InvalidTypeError(
                    field, f"expected a message dict, got {type(message).__name__}"
                )
            checked = dict(message)
        role = checked.get("role")
        if role not in ROLES:
            raise InvalidRoleError(
                f"{field}.role", f"unknown role {role!r}", f"use one of {', '.join(sorted(ROLES))}"
            )
        content = checked.get("content")
        if not (content is None or isinstance(content, (str, list, dict))):
            raise InvalidTypeError(
                f"{field}.content",
                f"expected str, list, dict or None, got {type(content).__name__}",
            )
        return checked

    def _check_all(self, messages: Any) -> list[dict[str, Any]]:
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
            raise InvalidTypeError("messages", "expected a list of message dicts")
        return [self._check(m, f"messages[{i}]") for i, m in enumerate(messages)]

    def append(self, message: dict[str, Any]) -> None:
        """Add one message dict; the oldest leave when the window is full."""
        if (
            type(message) is dict
            and message.get("role") in _PLAIN_ROLES
            and type(message.get("content")) is str
            and "tool_calls" not in message
        ):
            self._append(message, True)
            return
        message = self._check(message)
        self._append(message, "tool_calls" not in message and message["role"] != "tool")

    def extend(self, messages: Iterable[dict[str, Any]]) -> None:
        """Add several message dicts (all validated before any is added)."""
        self._push_all(self._check_all(messages))

    def get_messages(self) -> list[dict[str, Any]]:
        """All buffered messages, oldest first (copies)."""
        return [dict(m) for m in self._snapshot()]

    def set_messages(self, messages: Iterable[dict[str, Any]]) -> None:
        """Replace the contents (hot reload); the window is applied to the new list."""
        checked = self._check_all(messages)
        with self._lock:
            self._reset()
            self._push_all(checked)

    def clear(self) -> None:
        """Remove all messages (not an eviction: consumers are not called)."""
        with self._lock:
            self._reset()

    async def async_snapshot(self) -> list[dict[str, Any]]:
        """:meth:`get_messages` under the asyncio lock."""
        async with self._async_lock():
            return self.get_messages()

    async def async_replace(self, messages: Iterable[dict[str, Any]]) -> None:
        """:meth:`set_messages` under the asyncio lock."""
        async with self._async_lock():
            self.set_messages(messages)

    async def async_append(self, message: dict[str, Any]) -> None:
        """:meth:`append` under the asyncio lock."""
        async with self._async_lock():
            self.append(message)

    def to_dict(self) -> dict[str, Any]:
        """``{"max_messages", "enabled", "messages"}`` with copies of the messages."""
        return {
            "max_messages": self.max_messages,
            "enabled": self.enabled,
            "messages": [copy_json(m) for m in self._snapshot()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConversationBuffer:
        """Rebuild from :meth:`to_dict`, keeping only what fits the window."""
        if not isinstance(data, Mapping):
            raise SerializationError("buffer", f"expected a dict, got {type(data).__name__}")
        try:
            buffer = cls(
                max_messages=data.get("max_messages", 100), enabled=data.get("enabled", True)
            )
            buffer.extend(data.get("messages", []))
        except (InvalidTypeError, InvalidSizeError) as exc:
            raise SerializationError(exc.field, exc.problem, exc.hint) from None
        except ValueError as exc:  # InvalidRoleError
            raise SerializationError("messages", str(exc)) from None
        return buffer

    def __repr__(self) -> str:
        return f"ConversationBuffer(messages={len(self)}, max={self.max_messages})"


class BufferRegistry:
    """One :class:`BufferMemory` per (user_id, session_id), created on first use.

    Args:
        factory: builds the buffer for a new key.
        max_buffers: keep at most this many; the least recently used is drained to its
            eviction consumers (nothing is lost) and dropped.
    """

    def __init__(
        self,
        factory: Callable[[str, str | None], BufferMemory] | None = None,
        max_buffers: int | None = None,
    ) -> None:
        self._factory = factory or (lambda user_id, session_id: BufferMemory())
        self._max = check_size("max_buffers", max_buffers)
        self._buffers: OrderedDict[tuple[str, str | None], BufferMemory] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(user_id: Any, session_id: Any) -> tuple[str, str | None]:
        if not isinstance(user_id, str) or not user_id:
            raise MissingUserError("user_id", "a non-empty string is required")
        if session_id is not None and not isinstance(session_id, str):
            raise InvalidTypeError("session_id", "expected a string or None")
        return user_id, session_id

    def get(self, user_id: str, session_id: str | None = None) -> BufferMemory:
        """The buffer of this user and session, created if needed."""
        key = self._key(user_id, session_id)
        with self._lock:
            buffer = self._buffers.get(key)
            if buffer is not None:
                self._buffers.move_to_end(key)
                return buffer
            buffer = self._factory(*key)
            self._buffers[key] = buffer
            evicted = []
            while self._max is not None and len(self._buffers) > self._max:
                evicted.append(self._buffers.popitem(last=False)[1])
        for old in evicted:
            old.drain()
        return buffer

    def peek(self, user_id: str, session_id: str | None = None) -> BufferMemory | None:
        """The buffer if it exists, without creating it."""
        with self._lock:
            return self._buffers.get(self._key(user_id, session_id))

    def drop(self, user_id: str, session_id: str | None = None, *, drain: bool = True) -> None:
        """Remove a buffer; with ``drain`` its messages go to its consumers first."""
        with self._lock:
            buffer = self._buffers.pop(self._key(user_id, session_id), None)
        if buffer is not None and drain:
            buffer.drain()

    def drop_user(self, user_id: str, *, drain: bool = True) -> int:
        """Remove every buffer of ``user_id``; returns how many."""
        self._key(user_id, None)
        with self._lock:
            keys = [k for k in self._buffers if k[0] == user_id]
            buffers = [self._buffers.pop(k) for k in keys]
        if drain:
            for buffer in buffers:
                buffer.drain()
        return len(buffers)

    def keys(self) -> list[tuple[str, str | None]]:
        """(user_id, session_id) of every live buffer."""
        with self._lock:
            return list(self._buffers)

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._buffers)

    def __contains__(self, key: object) -> bool:
        return key in self._buffers


__all__ = [
    "BufferMemory",
    "BufferRegistry",
    "ConversationBuffer",
]
