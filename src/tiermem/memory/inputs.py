"""The facade's new memories checked and turned into what the store takes (messages and
message ids are checked by :mod:`tiermem.types.checks`, shared with the clients). Bad
input raises an InputError naming the field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError
from tiermem.stores.records import NewMemory
from tiermem.types.checks import MAX_CONTENT_CHARS, MAX_LIMIT, check_content, check_list

MEMORY_FIELDS = frozenset(
    {"content", "memory_type", "importance", "session_id", "agent_id", "metadata", "created_at"}
)
"""The fields of an item of :meth:`Memory.remember_many`."""
MEMORY_HINT = (
    "a memory is one statement, embedded whole: shorten it, or add a long text as a "
    "message, kept whole up to memory.max_message_chars and found by its passages"
)


def memory_content(content: object, max_chars: int, name: str = "content") -> str:
    """A memory's content: text of at most ``max_chars`` characters (what the embedder
    takes whole), else a ContentTooLargeError saying where a long text goes."""
    return check_content(content, name, max_chars, MEMORY_HINT)


def new_memories(
    memories: Iterable[Mapping[str, Any]], max_chars: int = MAX_CONTENT_CHARS
) -> list[NewMemory]:
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
                content=memory_content(raw.get("content"), max_chars, f"{name}.content"),
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
