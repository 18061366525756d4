"""The facade's arguments checked and turned into what the tiers take: messages, new
memories, message ids. Bad input raises an InputError naming the field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError
from tiermem.messages import Message, check_fields
from tiermem.stores.records import NewMemory
from tiermem.stores.validate import MAX_LIMIT, check_content, check_text_id, check_user_id

MEMORY_FIELDS = frozenset(
    {"content", "memory_type", "importance", "session_id", "agent_id", "metadata", "created_at"}
)
"""The fields of an item of :meth:`Memory.remember_many`."""


def message(
    role: Any,
    content: Any,
    user_id: str,
    session_id: str | None,
    timestamp: Any,
    metadata: Any,
    fields: Mapping[str, Any],
    name: str = "message",
) -> Message:
    """A :class:`Message` of the user's session (errors named after ``name``)."""
    check_user_id(user_id)
    check_text_id(session_id, "session_id")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidTypeError("metadata", f"expected a dict, got {type(metadata).__name__}")
    check_fields(fields, name)
    meta = {**(metadata or {}), "user_id": user_id}
    if session_id is not None:
        meta["session_id"] = session_id
    extra = dict(fields)
    if timestamp is not None:
        extra["timestamp"] = timestamp
    try:
        return Message(role, content, metadata=meta, **extra)
    except InputError as exc:
        if name == "message" or exc.field.startswith(name):
            raise
        raise exc.relabel(f"{name}.{exc.field}") from None


def messages(
    items: Iterable[Message | Mapping[str, Any]], user_id: str, session_id: str | None
) -> list[Message]:
    """``add_messages``' messages, validated (Message objects as they are)."""
    check_user_id(user_id)
    check_list(items, "messages", "a list of messages", "wrap a single message in a list")
    batch: list[Message] = []
    for i, raw in enumerate(items):
        if isinstance(raw, Message):
            batch.append(raw)
        elif isinstance(raw, Mapping):
            data = dict(raw)
            batch.append(
                message(
                    data.pop("role", None),
                    data.pop("content", None),
                    user_id,
                    session_id,
                    data.pop("timestamp", None),
                    data.pop("metadata", None),
                    data,
                    f"messages[{i}]",
                )
            )
        else:
            raise InvalidTypeError(f"messages[{i}]", "expected a Message or a message dict")
    if not batch:
        raise InputError("messages", "is empty", "pass at least one message")
    return batch


def new_memories(memories: Iterable[Mapping[str, Any]]) -> list[NewMemory]:
    """``remember_many``'s items as memories to add (the store checks their values)."""
    check_list(memories, "memories", "a list of memory dicts", "wrap a single memory in a list")
    items: list[NewMemory] = []
    for i, raw in enumerate(memories):
        name = f"memories[{i}]"
        if len(items) == MAX_LIMIT:
            raise InvalidSizeError("memories", f"has more than {MAX_LIMIT} items", "split it")
        if not isinstance(raw, Mapping):
            raise InvalidTypeError(name, f"expected a dict, got {type(raw).__name__}")
        unknown = sorted(str(k) for k in set(raw) - MEMORY_FIELDS)
        if unknown:
            raise InvalidTypeError(
                f"{name}.{unknown[0]}",
                "is not a field of a memory",
                f"use {', '.join(sorted(MEMORY_FIELDS))}",
            )
        items.append(
            NewMemory(
                content=check_content(raw.get("content"), f"{name}.content"),
                memory_type=raw.get("memory_type", "fact"),
                agent_id=raw.get("agent_id"),
                session_id=raw.get("session_id"),
                importance=raw.get("importance", 0.5),
                metadata=raw.get("metadata"),
                created_at=raw.get("created_at"),
            )
        )
    if not items:
        raise InputError("memories", "is empty", "pass at least one memory")
    return items


def check_list(value: Any, field: str, expected: str, fix: str) -> None:
    """Refuse where a list is expected a value that is not iterable, or is one item (a
    str, bytes, a dict or a Message)."""
    if isinstance(value, (str, bytes, Mapping, Message)) or not isinstance(value, Iterable):
        raise InvalidTypeError(field, f"expected {expected}, got {type(value).__name__}", fix)


def message_ids(ids: Any) -> list[str]:
    """Message ids given as one id or an iterable of ids, each a valid text id."""
    if isinstance(ids, str):
        ids = [ids]
    if isinstance(ids, (bytes, Mapping)) or not isinstance(ids, Iterable):
        raise InvalidTypeError("message_ids", f"expected a list of ids, got {type(ids).__name__}")
    found = list(ids)
    for i, message_id in enumerate(found):
        check_text_id(message_id, f"message_ids[{i}]")
    return found
