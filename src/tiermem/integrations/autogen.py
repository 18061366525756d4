"""AutoGen: ``TiermemAutogenMemory``, an ``autogen_core.memory.Memory`` over tiermem.

Give it to an AutoGen agent (``AssistantAgent(..., memory=[TiermemAutogenMemory(m, "ana")])``)
or call it yourself: ``add`` stores a text or JSON ``MemoryContent`` as a memory of the
user, ``query`` runs tiermem's hybrid search, and ``update_context`` adds what it finds for
the latest user message to the model context as one system message.

What this memory holds are the entries added through it (tagged with its ``name``);
``search_all=True`` makes ``query`` and ``update_context`` search all of the user's
memories (conversations included). ``clear`` deletes only the entries added through it.

Requires the ``autogen`` extra (``pip install "tiermem[autogen]"``).
"""

from __future__ import annotations

import json
from typing import Any

from tiermem.extras import needs_extra

with needs_extra("autogen", "tiermem.integrations.autogen", "the AutoGen adapter"):
    from autogen_core import CancellationToken
    from autogen_core.memory import (
        Memory,
        MemoryContent,
        MemoryMimeType,
        MemoryQueryResult,
        UpdateContextResult,
    )
    from autogen_core.model_context import ChatCompletionContext
    from autogen_core.models import SystemMessage, UserMessage

from tiermem.errors import ClosedError, InputError, InvalidSizeError, InvalidTypeError
from tiermem.integrations import _common
from tiermem.types.checks import MAX_LIMIT, check_importance, check_memory_type

SOURCE_KEY = "autogen_memory"
"""Metadata key naming the AutoGen memory an entry was added through."""
CONTENT_KEY = "autogen_content"
"""Metadata key holding the entry's JSON content, MIME type and metadata."""
ADOPTED_KEY = "autogen_adopted"
"""Metadata flag of a memory the user had before it was added here (clear keeps it)."""
HEADER = "Relevant memory content:"


class TiermemAutogenMemory(Memory):
    """One user's memory for AutoGen agents, kept by a :class:`tiermem.Memory`.

    Args:
        memory: the tiermem Memory (shared; :meth:`close` leaves it open).
        user_id: whose memory it is; no other user's memories are ever read.
        name: tags the entries added through this memory.
        k: how many entries ``query`` returns by default.
        search_all: search all of the user's memories, not only the entries added here.
        memory_type: tiermem memory type of the entries added (``fact``, ``preference``...).
        importance: explicit importance of the entries added (0 to 1).
    """

    def __init__(
        self,
        memory: Any,
        user_id: str,
        *,
        name: str = "tiermem",
        k: int = 5,
        search_all: bool = False,
        memory_type: str = "fact",
        importance: float = 0.5,
    ) -> None:
        self.memory = memory
        self.user_id = _common.check_id(user_id, "user_id")
        self.name = _common.check_id(name, "name")
        self.k = _check_k(k)
        self.search_all = bool(search_all)
        self.memory_type = check_memory_type(memory_type)
        self.importance = check_importance(importance)
        self._closed = False

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add the entries relevant to the latest user message as one system message."""
        self._check_open()
        if not isinstance(model_context, ChatCompletionContext):
            raise InvalidTypeError("model_context", "expected an AutoGen ChatCompletionContext")
        messages = await model_context.get_messages()
        query = next(
            (_text(m.content) for m in reversed(messages) if isinstance(m, UserMessage)), ""
        )
        if not query.strip():
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        found = await self.query(query)
        if found.results:
            lines = [f"{i}. {_text(c.content)}" for i, c in enumerate(found.results, 1)]
            await model_context.add_message(SystemMessage(content="\n".join([HEADER, *lines])))
        return UpdateContextResult(memories=found)

    async def query(
        self,
        query: str | MemoryContent,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> MemoryQueryResult:
        """The entries that best match ``query`` (hybrid search), best first.

        ``k`` in ``kwargs`` overrides how many are returned.
        """
        self._check_open()
        text = query.content if isinstance(query, MemoryContent) else query
        if not isinstance(text, str):
            raise InvalidTypeError("query", f"expected text, got {type(text).__name__}")
        unknown = set(kwargs) - {"k"}
        if unknown:
            raise InputError(sorted(unknown)[0], "is not an option of query", "use k=")
        k = _check_k(kwargs.get("k", self.k))
        if not text.strip():
            return MemoryQueryResult(results=[])
        filters = None if self.search_all else {"metadata": {SOURCE_KEY: self.name}}
        hits = await self.memory.asearch(text, self.user_id, k=k, filters=filters)
        return MemoryQueryResult(results=[_content(h.record, h.score) for h in hits])

    async def add(
        self, content: MemoryContent, cancellation_token: CancellationToken | None = None
    ) -> None:
        """Store a text (str) or JSON (dict) entry; its MIME type and metadata are kept."""
        self._check_open()
        if not isinstance(content, MemoryContent):
            raise InvalidTypeError(
                "content", f"expected a MemoryContent, got {type(content).__name__}"
            )
        value = content.content
        if isinstance(value, str):
            text = value
        elif isinstance(value, dict):
            text = json.dumps(_common.json_copy(value, "content.content"), ensure_ascii=False)
        else:
            raise InvalidTypeError(
                "content.content",
                f"tiermem keeps text and JSON, not {type(value).__name__}",
                "store a text description of the image or bytes",
            )
        saved = {
            "content": value,
            "mime_type": content.serialize_mime_type(content.mime_type),
            "metadata": content.metadata,
        }
        metadata = {SOURCE_KEY: self.name, CONTENT_KEY: _common.json_copy(saved, "content")}
        memory_id = await self.memory.aremember(
            text, self.user_id, self.memory_type, self.importance, metadata=metadata
        )
        stored = await self.memory.aget_memory(memory_id, self.user_id)
        if stored is not None and stored.metadata.get(SOURCE_KEY) != self.name:
            # the user already had this text (tiermem keeps one memory per text): it joins
            # this AutoGen memory, and clear() gives it back untagged instead of deleting it
            adopted = {**stored.metadata, **metadata, ADOPTED_KEY: True}
            await self.memory.aupdate_memory(memory_id, self.user_id, metadata=adopted)

    async def clear(self) -> None:
        """Delete every entry added through this memory (the user's other memories stay)."""
        self._check_open()
        await _common.in_thread(self._clear)

    async def close(self) -> None:
        """Stop using this memory; the tiermem Memory it wraps stays open (it is shared)."""
        self._closed = True

    def _clear(self) -> None:
        memory = self.memory
        ours = (SOURCE_KEY, CONTENT_KEY, ADOPTED_KEY)
        while True:
            page = memory.list_memories(
                self.user_id, limit=MAX_LIMIT, metadata={SOURCE_KEY: self.name}
            )
            if not page:
                return
            for record in page:
                if record.metadata.get(ADOPTED_KEY):
                    kept = {k: v for k, v in record.metadata.items() if k not in ours}
                    memory.update_memory(str(record.id), self.user_id, metadata=kept)
                else:
                    memory.forget(str(record.id), self.user_id)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"the AutoGen memory {self.name!r} is closed")


def _content(record: Any, score: float) -> MemoryContent:
    """A stored memory as AutoGen's MemoryContent (the entry as added, when it was)."""
    saved = record.metadata.get(CONTENT_KEY)
    details = {"memory_id": str(record.id), "score": float(score), "type": record.memory_type}
    if isinstance(saved, dict):
        return MemoryContent(
            content=saved["content"],
            mime_type=saved["mime_type"],
            metadata={**(saved.get("metadata") or {}), **details},
        )
    return MemoryContent(content=record.content, mime_type=MemoryMimeType.TEXT, metadata=details)


def _check_k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidSizeError("k", f"must be an int in [1, {MAX_LIMIT}], got {value!r}")
    return value


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False)
    if isinstance(content, list):
        return "\n".join(part for part in content if isinstance(part, str))
    return ""


__all__ = ["TiermemAutogenMemory"]
