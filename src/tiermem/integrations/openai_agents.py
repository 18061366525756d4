"""OpenAI Agents SDK: ``TiermemSession`` (the SDK's ``Session`` protocol) and
``context_instructions`` (tiermem's context in an agent's instructions).

``Runner.run(agent, text, session=TiermemSession(memory, user_id, session_id))`` reads the
conversation so far from tiermem and stores every new item there: user and assistant
messages, function calls and their outputs, and any other item kind, each kept as the SDK
gave it and also as an ordinary tiermem message of the session (searchable, in
``get_context``). ``Agent(instructions=context_instructions(memory, user_id, "..."))`` adds,
on every turn, what ``Memory.get_context`` finds for the user's latest input.

Requires the ``openai-agents`` extra (``pip install "tiermem[openai-agents]"``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tiermem.extras import needs_extra

with needs_extra("openai-agents", "tiermem.integrations.openai_agents", "the Agents SDK session"):
    from agents.memory import SessionSettings

from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.integrations import _common
from tiermem.messages import Message, content_text

ITEM_KEY = "openai_item"
"""Message metadata key holding the SDK's item as it was given."""
DEFAULT_CONTEXT_TOKENS = 2000


class TiermemSession:
    """The items of one user's session, kept by a :class:`tiermem.Memory`.

    Args:
        memory: the Memory that keeps the items (shared by many sessions).
        user_id: whose session it is; no other user's items are ever read.
        session_id: the conversation.
        session_settings: the SDK's settings (``limit``: items :meth:`get_items` returns
            when called without one).
    """

    def __init__(
        self,
        memory: Any,
        user_id: str,
        session_id: str,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.memory = memory
        self.user_id = _common.check_id(user_id, "user_id")
        self.session_id = _common.check_id(session_id, "session_id")
        if session_settings is not None and not isinstance(session_settings, SessionSettings):
            raise InvalidTypeError("session_settings", "expected agents.memory.SessionSettings")
        self.session_settings = session_settings

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, oldest first; the newest ``limit`` when given."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise InvalidSizeError("limit", f"must be an int >= 0 or None, got {limit!r}")
        entries = await _common.in_thread(self._read)
        items = [item for entry in entries for item in from_tiermem(entry.message)]
        if limit is None:
            return items
        return items[len(items) - limit :] if limit else []

    async def add_items(self, items: list[Any]) -> None:
        """Add items in order (all are checked before any is added)."""
        checked = _common.check_list(items, "items")
        messages = [to_tiermem(item, f"items[{i}]") for i, item in enumerate(checked)]
        if messages:
            await _common.in_thread(
                _common.append, self.memory, self.user_id, self.session_id, messages
            )

    async def pop_item(self) -> Any:
        """Remove and return the newest item, or None when the session is empty."""
        entries = await _common.in_thread(self._read)
        if not entries:
            return None
        last = entries[-1]
        await _common.in_thread(_common.remove, self.memory, self.user_id, self.session_id, [last])
        return from_tiermem(last.message)[-1]

    async def clear_session(self) -> None:
        """Delete every item of the session (its buffer, stored rows and summaries)."""
        await _common.in_thread(_common.clear, self.memory, self.user_id, self.session_id)

    def _read(self) -> list[_common.Entry]:
        return _common.read(self.memory, self.user_id, self.session_id)


def context_instructions(
    memory: Any,
    user_id: str,
    instructions: str = "",
    *,
    session_id: str | None = None,
    max_tokens: int = DEFAULT_CONTEXT_TOKENS,
) -> Callable[[Any, Any], Awaitable[str]]:
    """Dynamic instructions for an ``Agent``: ``instructions`` followed by tiermem's context.

    On each turn the context is ``Memory.get_context`` for the newest user input of the
    turn, fitted to ``max_tokens``. Leave ``session_id`` None when the agent also runs with
    a :class:`TiermemSession`: the session already sends the recent turns.
    """
    _common.check_id(user_id, "user_id")
    if not isinstance(instructions, str):
        raise InvalidTypeError("instructions", f"expected str, got {type(instructions).__name__}")
    if session_id is not None:
        _common.check_id(session_id, "session_id")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidSizeError("max_tokens", f"must be an int >= 1, got {max_tokens!r}")

    async def render(run_context: Any, agent: Any) -> str:
        query = latest_user_text(getattr(run_context, "turn_input", None) or [])
        context = await memory.aget_context(query, user_id, session_id, max_tokens)
        return "\n\n".join(part for part in (instructions, context.text()) if part)

    return render


def latest_user_text(items: list[Any]) -> str:
    """The text of the newest user message among SDK input items ("" if none)."""
    for item in reversed(items):
        if isinstance(item, Mapping) and item.get("role") == "user":
            return _text(item.get("content"))
    return ""


def to_tiermem(item: Any, field: str = "item") -> Message:
    """A tiermem :class:`Message` for an SDK item, carrying the item itself.

    Messages keep their role (``developer`` reads as ``system``), ``function_call`` items
    become assistant tool calls and ``function_call_output`` items tool results, so the
    planner and the other adapters read them; any other item kind is kept as an assistant
    message with whatever text it has.
    """
    if hasattr(item, "model_dump"):
        item = item.model_dump(exclude_unset=True, mode="json")
    if not isinstance(item, Mapping):
        raise InvalidTypeError(
            field, f"expected an item dict, got {type(item).__name__}", "pass the SDK's items"
        )
    saved = _common.json_copy(dict(item), field)
    kind = saved.get("type")
    role = saved.get("role")
    metadata = {ITEM_KEY: saved}
    if kind in (None, "message") and role in ("user", "assistant", "system", "developer"):
        role = "system" if role == "developer" else role
        return Message(role, _text(saved.get("content")), metadata=metadata)
    if kind == "function_call":
        call = {
            "id": str(saved.get("call_id") or saved.get("id") or ""),
            "type": "function",
            "function": {"name": saved.get("name"), "arguments": saved.get("arguments") or ""},
        }
        try:
            return Message("assistant", None, tool_calls=[call], metadata=metadata)
        except InvalidTypeError as exc:
            raise InvalidTypeError(field, "a function_call needs a call_id and a name") from exc
    if kind == "function_call_output":
        output = saved.get("output")
        return Message(
            "tool",
            _text(output),
            tool_call_id=str(saved.get("call_id") or ""),
            metadata=metadata,
        )
    if kind is None and role is None:
        raise InvalidTypeError(field, "has neither a 'type' nor a 'role'", "pass the SDK's items")
    text = _text(saved.get("content") or saved.get("summary") or saved.get("output"))
    return Message("assistant", text or f"[{kind or role}]", metadata=metadata)


def from_tiermem(message: Message) -> list[Any]:
    """The SDK items a tiermem message stands for: the item it carries, else built from it."""
    saved = message.metadata.get(ITEM_KEY)
    if isinstance(saved, dict):
        return [saved]
    if message.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id or "",
                "output": message.text,
            }
        ]
    role = {"agent_call": "user", "agent_response": "assistant"}.get(message.role, message.role)
    items: list[Any] = [{"role": role, "content": message.text}] if message.text else []
    for call in message.tool_calls or []:
        items.append(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"].get("arguments") or "",
            }
        )
    return items or [{"role": role, "content": ""}]


def _text(content: Any) -> str:
    if isinstance(content, list):
        return content_text(content)
    return content if isinstance(content, str) else "" if content is None else str(content)


__all__ = [
    "TiermemSession",
    "context_instructions",
    "from_tiermem",
    "latest_user_text",
    "to_tiermem",
]
