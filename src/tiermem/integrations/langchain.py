"""LangChain: a ``BaseChatMessageHistory`` kept in tiermem.

``TiermemChatMessageHistory(memory, user_id, session_id)`` is what LangChain's
``RunnableWithMessageHistory`` (or any code that takes a chat history) reads and writes.
Every message is kept losslessly (LangChain's own serialized form travels with it: tool
calls, tool results, ids, ``additional_kwargs``, ``response_metadata``), and is also an
ordinary tiermem message of the session: in the buffer, searchable, in ``get_context``.

Requires the ``langchain`` extra (``pip install "tiermem[langchain]"``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tiermem.extras import needs_extra

with needs_extra("langchain", "tiermem.integrations.langchain", "the LangChain adapter"):
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )

from tiermem.errors import InvalidTypeError
from tiermem.integrations import _common
from tiermem.messages import ROLES, Message

LANGCHAIN_KEY = "langchain"
"""Message metadata key holding LangChain's serialized message."""
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


class TiermemChatMessageHistory(BaseChatMessageHistory):
    """The chat history of one user's session, kept by a :class:`tiermem.Memory`.

    Args:
        memory: the Memory that keeps the messages (shared by many histories).
        user_id: whose history it is; no other user's messages are ever read.
        session_id: the conversation.
    """

    def __init__(self, memory: Any, user_id: str, session_id: str) -> None:
        self.memory = memory
        self.user_id = _common.check_id(user_id, "user_id")
        self.session_id = _common.check_id(session_id, "session_id")

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages, oldest first, as they were added."""
        entries = _common.read(self.memory, self.user_id, self.session_id)
        return [from_tiermem(e.message) for e in entries]

    async def aget_messages(self) -> list[BaseMessage]:
        """Async twin of :attr:`messages`."""
        entries = await _common.in_thread(_common.read, self.memory, self.user_id, self.session_id)
        return [from_tiermem(e.message) for e in entries]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Add messages in order (all are checked before any is added)."""
        items = _common.check_list(messages, "messages")
        converted = [to_tiermem(m, f"messages[{i}]") for i, m in enumerate(items)]
        _common.append(self.memory, self.user_id, self.session_id, converted)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async twin of :meth:`add_messages`."""
        await _common.in_thread(self.add_messages, messages)

    def clear(self) -> None:
        """Delete the session's messages (its buffer, stored rows and summaries)."""
        _common.clear(self.memory, self.user_id, self.session_id)

    async def aclear(self) -> None:
        """Async twin of :meth:`clear`."""
        await _common.in_thread(_common.clear, self.memory, self.user_id, self.session_id)


def to_tiermem(message: Any, field: str = "message") -> Message:
    """A tiermem :class:`Message` for a LangChain message, carrying the message itself.

    Tool calls become OpenAI-shaped ``tool_calls`` and a ``ToolMessage`` a ``tool``
    message with its ``tool_call_id``, so the planner and other adapters read them too.
    """
    if not isinstance(message, BaseMessage):
        raise InvalidTypeError(
            field,
            f"expected a LangChain BaseMessage, got {type(message).__name__}",
            "pass HumanMessage, AIMessage, SystemMessage or ToolMessage objects",
        )
    role = _ROLES.get(message.type.removesuffix("Chunk").lower().replace("message", ""))
    if role is None:
        declared = getattr(message, "role", None)
        role = declared if declared in ROLES else "tool" if message.type == "function" else "user"
    calls = [
        {
            "id": call.get("id") or f"call_{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call.get("args", {}))},
        }
        for i, call in enumerate(getattr(message, "tool_calls", None) or [])
    ]
    content = message.content
    return Message(
        role,
        _common.json_copy(content, f"{field}.content"),
        name=message.name if isinstance(message.name, str) else None,
        tool_calls=calls or None,
        tool_call_id=getattr(message, "tool_call_id", None),
        metadata={LANGCHAIN_KEY: _common.json_copy(message_to_dict(message), field)},
    )


def from_tiermem(message: Message) -> BaseMessage:
    """The LangChain message a tiermem message holds, else one built from its fields."""
    saved = message.metadata.get(LANGCHAIN_KEY)
    if isinstance(saved, dict):
        return messages_from_dict([saved])[0]
    content: Any = message.content if isinstance(message.content, (str, list)) else message.text
    if message.role == "tool":
        return ToolMessage(content=content, tool_call_id=message.tool_call_id or "")
    if message.role == "system":
        return SystemMessage(content=content)
    if message.role in ("assistant", "agent_response"):
        calls = [
            {
                "id": call["id"],
                "name": call["function"]["name"],
                "args": _arguments(call["function"].get("arguments")),
            }
            for call in message.tool_calls or []
        ]
        return AIMessage(content=content, tool_calls=calls, name=message.name)
    return HumanMessage(content=content, name=message.name)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {"arguments": raw}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


__all__ = ["TiermemChatMessageHistory", "from_tiermem", "to_tiermem"]
