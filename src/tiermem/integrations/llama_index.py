"""LlamaIndex: ``TiermemChatMemory`` (a ``BaseMemory``) and ``TiermemMemoryBlock`` (a memory
block for LlamaIndex's ``Memory``).

``TiermemChatMemory.from_defaults(memory=m, user_id="ana", session_id="s1")`` is a chat
memory for LlamaIndex agents and chat engines: ``put`` / ``get`` / ``get_all`` / ``set`` /
``reset`` and their async twins. Messages are kept losslessly (blocks, images,
``additional_kwargs``) and are ordinary tiermem messages of the session; ``get(input)``
also puts what ``Memory.get_context`` finds for ``input`` in a system message first.

``TiermemMemoryBlock(memory=m, user_id="ana")`` plugs tiermem into LlamaIndex's own
``Memory`` (``Memory.from_defaults(memory_blocks=[block])``): on each ``get`` it renders
tiermem's context for the latest user message, and the messages LlamaIndex flushes out
of its short-term queue are added to tiermem.

Requires the ``llama-index`` extra (``pip install "tiermem[llama-index]"``).
"""

from __future__ import annotations

from typing import Any

from tiermem.extras import needs_extra

with needs_extra("llama-index", "tiermem.integrations.llama_index", "the LlamaIndex adapter"):
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.memory import BaseMemory
    from llama_index.core.memory.memory import BaseMemoryBlock

from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.integrations import _common
from tiermem.messages import Message

LLAMA_INDEX_KEY = "llama_index"
"""Message metadata key holding LlamaIndex's serialized message."""
DEFAULT_TOKEN_LIMIT = 3000
DEFAULT_CONTEXT_TOKENS = 1000
_ROLES = {
    "developer": "system",
    "function": "tool",
    "chatbot": "assistant",
    "model": "assistant",
}


class TiermemChatMemory(BaseMemory):
    """The chat memory of one user's session, kept by a :class:`tiermem.Memory`.

    Attributes:
        memory: the Memory that keeps the messages (shared by many chat memories).
        user_id: whose messages they are; no other user's messages are ever read.
        session_id: the conversation.
        token_limit: most tokens of history :meth:`get` returns (newest messages first).
        context_tokens: budget of the retrieved context :meth:`get` adds for an ``input``.
    """

    memory: Any = Field(exclude=True)
    user_id: str
    session_id: str
    token_limit: int = DEFAULT_TOKEN_LIMIT
    context_tokens: int = DEFAULT_CONTEXT_TOKENS

    def __init__(self, **data: Any) -> None:
        # checked here, not by pydantic validators, which would wrap the typed errors
        for field in ("user_id", "session_id"):
            _common.check_id(data.get(field), field)
        for field in ("token_limit", "context_tokens"):
            if field in data:
                _check_size(data[field], field)
        super().__init__(**data)

    @classmethod
    def class_name(cls) -> str:
        return "TiermemChatMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        memory: Any,
        user_id: str,
        session_id: str,
        chat_history: list[ChatMessage] | None = None,
        token_limit: int = DEFAULT_TOKEN_LIMIT,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        **kwargs: Any,
    ) -> TiermemChatMemory:
        """A chat memory of the session; ``chat_history`` is added to it when given."""
        if kwargs:
            raise InvalidTypeError(sorted(kwargs)[0], "is not an option of TiermemChatMemory")
        chat = cls(
            memory=memory,
            user_id=user_id,
            session_id=session_id,
            token_limit=token_limit,
            context_tokens=context_tokens,
        )
        if chat_history is not None:
            chat.put_messages(chat_history)
        return chat

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The newest messages within ``token_limit`` (see :meth:`_newest`), oldest first;
        with an ``input``, a system message of what tiermem recalls for it comes first."""
        if input is not None and not isinstance(input, str):
            raise InvalidTypeError("input", f"expected str, got {type(input).__name__}")
        history = [e.message for e in _common.read(self.memory, self.user_id, self.session_id)]
        recent = [from_tiermem(m) for m in self._newest(history)]
        if input and input.strip():
            context = self.memory.get_context(input, self.user_id, None, self.context_tokens)
            if context.text():
                recent.insert(0, ChatMessage(role=MessageRole.SYSTEM, content=context.text()))
        return recent

    def _newest(self, history: list[Message]) -> list[Message]:
        """The newest messages within ``token_limit``; when older ones are cut, the result
        starts with neither an assistant nor a tool message (as LlamaIndex's
        ChatMemoryBuffer: no tool result without its call). The newest message alone when
        even it is over the limit."""
        counter = self.memory.token_counter
        start, used = len(history), 0
        while start > 0 and used + counter.count(history[start - 1].text) <= self.token_limit:
            start -= 1
            used += counter.count(history[start].text)
        while 0 < start < len(history) - 1 and history[start].role in ("assistant", "tool"):
            start += 1
        return history[start:] or history[-1:]

    def get_all(self) -> list[ChatMessage]:
        """Every message of the session, oldest first."""
        entries = _common.read(self.memory, self.user_id, self.session_id)
        return [from_tiermem(e.message) for e in entries]

    def put(self, message: ChatMessage) -> None:
        """Add one message."""
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Add messages in order (all are checked before any is added)."""
        items = _common.check_list(messages, "messages")
        converted = [to_tiermem(m, f"messages[{i}]") for i, m in enumerate(items)]
        _common.append(self.memory, self.user_id, self.session_id, converted)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the session's messages with ``messages``."""
        items = _common.check_list(messages, "messages")
        converted = [to_tiermem(m, f"messages[{i}]") for i, m in enumerate(items)]
        _common.clear(self.memory, self.user_id, self.session_id)
        _common.append(self.memory, self.user_id, self.session_id, converted)

    def reset(self) -> None:
        """Delete the session's messages (its buffer, stored rows and summaries)."""
        _common.clear(self.memory, self.user_id, self.session_id)


class TiermemMemoryBlock(BaseMemoryBlock[str]):
    """A block of LlamaIndex's ``Memory`` that recalls from, and adds to, tiermem.

    Attributes:
        memory: the :class:`tiermem.Memory`.
        user_id: whose memory it is.
        session_id: session of the flushed messages it adds, when LlamaIndex gives none.
        max_tokens: budget of the context it renders.
    """

    name: str = "tiermem"
    description: str | None = "What tiermem recalls about the user for the latest message."
    memory: Any = Field(exclude=True)
    user_id: str
    session_id: str | None = None
    max_tokens: int = DEFAULT_CONTEXT_TOKENS

    def __init__(self, **data: Any) -> None:
        _common.check_id(data.get("user_id"), "user_id")
        if data.get("session_id") is not None:
            _common.check_id(data["session_id"], "session_id")
        if "max_tokens" in data:
            _check_size(data["max_tokens"], "max_tokens")
        super().__init__(**data)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = next(
            (m.content or "" for m in reversed(messages or []) if m.role == MessageRole.USER), ""
        )
        context = await self.memory.aget_context(query, self.user_id, None, self.max_tokens)
        return str(context.text())

    async def _aput(self, messages: list[ChatMessage]) -> None:
        items = _common.check_list(messages, "messages")
        converted = [to_tiermem(m, f"messages[{i}]") for i, m in enumerate(items)]
        by_session: dict[str | None, list[Message]] = {}
        for original, message in zip(items, converted, strict=True):
            session = original.additional_kwargs.get("session_id") or self.session_id
            by_session.setdefault(session if isinstance(session, str) else None, []).append(message)
        for session_id, batch in by_session.items():
            await _common.in_thread(_common.append, self.memory, self.user_id, session_id, batch)


def to_tiermem(message: Any, field: str = "message") -> Message:
    """A tiermem :class:`Message` for a LlamaIndex ``ChatMessage``, carrying the message.

    OpenAI-style ``tool_calls`` and ``tool_call_id`` in ``additional_kwargs`` become the
    message's tool calls and tool result id, so the planner and other adapters read them.
    """
    if not isinstance(message, ChatMessage):
        raise InvalidTypeError(
            field,
            f"expected a LlamaIndex ChatMessage, got {type(message).__name__}",
            "pass llama_index.core.llms.ChatMessage objects",
        )
    try:
        saved = message.model_dump(mode="json")
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError(field, f"cannot be serialized: {exc}") from None
    saved = _common.json_copy(saved, field)
    role = str(message.role.value)
    extra = message.additional_kwargs
    calls = extra.get("tool_calls")
    valid_calls = calls if _openai_calls(calls) else None
    call_id = extra.get("tool_call_id")
    return Message(
        _ROLES.get(role, role),
        message.content or "",
        tool_calls=valid_calls,
        tool_call_id=call_id if isinstance(call_id, str) else None,
        metadata={LLAMA_INDEX_KEY: saved},
    )


def from_tiermem(message: Message) -> ChatMessage:
    """The ChatMessage a tiermem message holds, else one built from its fields."""
    saved = message.metadata.get(LLAMA_INDEX_KEY)
    if isinstance(saved, dict):
        return ChatMessage.model_validate(saved)
    role = {"agent_call": "user", "agent_response": "assistant"}.get(message.role, message.role)
    extra: dict[str, Any] = {}
    if message.tool_calls:
        extra["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        extra["tool_call_id"] = message.tool_call_id
    return ChatMessage(role=role, content=message.text, additional_kwargs=extra)


def _openai_calls(calls: Any) -> bool:
    try:
        Message("assistant", None, tool_calls=calls)
    except (TypeError, ValueError):
        return False
    return bool(calls)


def _check_size(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidSizeError(field, f"must be an int >= 1, got {value!r}")
    return value


__all__ = ["TiermemChatMemory", "TiermemMemoryBlock", "from_tiermem", "to_tiermem"]
