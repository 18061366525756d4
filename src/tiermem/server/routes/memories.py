"""Messages and memories: add, get a message, remember, list, get, update, forget, search,
context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query

from tiermem.errors import (
    InputError,
    NotFoundError,
    SerializationError,
    refuse_unknown,
)
from tiermem.messages import Message
from tiermem.server import models
from tiermem.server.deps import ERROR_RESPONSES, Caller, PathMessage
from tiermem.server.metrics import Metrics
from tiermem.server.service import Service
from tiermem.types.checks import MAX_LIMIT, check_text_id
from tiermem.wire import (
    context_to_json,
    hit_to_json,
    message_to_json,
    metadata_filter_from_json,
    record_to_json,
)


def router(service: Service, metrics: Metrics) -> APIRouter:
    """The memory API: one route per Memory operation (``metrics`` tells whether a
    request is the only one being answered)."""
    router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
    memory = service.memory

    @router.post("/messages", status_code=201, response_model=models.IdsOut, tags=["messages"])
    async def add_messages(body: models.MessagesIn, tenant: Caller) -> dict[str, Any]:
        """Add messages of a conversation (Memory.add_messages); their ids, in order."""
        user = tenant.scope(body.user_id)
        session = check_text_id(body.session_id, "session_id")
        agent = check_text_id(body.agent_id, "agent_id")
        batch = [_message_dict(raw, i) for i, raw in enumerate(body.messages)]

        def noted() -> None:
            service.note_user(tenant, body.user_id)

        if memory.commits_messages:  # validated here, committed with concurrent requests
            added, op = memory.stage_messages(batch, user, session, agent_id=agent)
            await service.commits.write(op, noted)
        else:

            def add() -> list[Message]:
                messages = memory.add_messages(batch, user, session, agent_id=agent)
                noted()
                return messages

            added = await anyio.to_thread.run_sync(add)
        return {"ids": [m.message_id for m in added]}

    @router.get("/messages/{message_id}", response_model=models.MessageOut, tags=["messages"])
    async def get_message(message_id: PathMessage, user_id: str, tenant: Caller) -> dict[str, Any]:
        """One message of the user, whole (Memory.get_message): a context marks an excerpt
        of a long message with its id. 404 MessageNotFoundError: the user has none."""
        message = await memory.aget_message(message_id, user_id=tenant.scope(user_id))
        return {"message": message_to_json(message, user_id)}

    @router.post("/memories", status_code=201, response_model=models.IdOut, tags=["memories"])
    def remember(body: models.MemoryIn, tenant: Caller) -> dict[str, Any]:
        """Store a fact, preference or other memory now (Memory.remember)."""
        user = tenant.scope(body.user_id)
        memory_id = memory.remember(
            body.content,
            user,
            body.memory_type,
            body.importance,
            session_id=check_text_id(body.session_id, "session_id"),
            agent_id=check_text_id(body.agent_id, "agent_id"),
            metadata=body.metadata,
        )
        service.note_user(tenant, body.user_id)
        return {"id": memory_id}

    @router.post(
        "/batch/memories", status_code=201, response_model=models.IdsOut, tags=["memories"]
    )
    def remember_many(body: models.MemoriesIn, tenant: Caller) -> dict[str, Any]:
        """Store several memories in one transaction, all or none (Memory.remember_many)."""
        items = [m.model_dump(exclude_none=True) for m in body.memories]
        ids = memory.remember_many(items, tenant.scope(body.user_id))
        service.note_user(tenant, body.user_id)
        return {"ids": ids}

    @router.get("/memories", response_model=models.MemoryPage, tags=["memories"])
    async def list_memories(
        tenant: Caller,
        user_id: str,
        limit: models.QueryInt = 100,
        cursor: str | None = None,
        memory_type: Annotated[list[models.MemoryTypeName] | None, Query()] = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        created_after: models.Timestamp | None = None,
        created_before: models.Timestamp | None = None,
        metadata: Annotated[
            str | None, Query(description='a JSON object of equalities, {"kind": "note"}')
        ] = None,
    ) -> dict[str, Any]:
        """A page of the user's memories, newest first; pass ``next_cursor`` for the next."""
        offset = _offset(cursor)
        page = await memory.alist_memories(
            tenant.scope(user_id),
            limit=limit,
            offset=offset,
            memory_type=memory_type or None,
            session_id=session_id,
            agent_id=agent_id,
            created_after=created_after,
            created_before=created_before,
            metadata=metadata_filter_from_json(
                metadata, "metadata", 'pass a JSON object such as {"kind": "note"}'
            ),
        )
        more = len(page) == limit and offset + limit < MAX_LIMIT
        return {
            "memories": [record_to_json(r, user_id) for r in page],
            "next_cursor": str(offset + limit) if more else None,
        }

    @router.get("/memories/{memory_id}", response_model=models.MemoryOut, tags=["memories"])
    async def get_memory(memory_id: str, user_id: str, tenant: Caller) -> dict[str, Any]:
        """One memory of the user."""
        record = await memory.aget_memory(memory_id, tenant.scope(user_id))
        if record is None:
            raise NotFoundError(f"user {user_id!r} has no memory {memory_id}")
        return record_to_json(record, user_id)

    @router.patch("/memories/{memory_id}", response_model=models.MemoryOut, tags=["memories"])
    def update_memory(
        memory_id: str, user_id: str, body: models.MemoryPatch, tenant: Caller
    ) -> dict[str, Any]:
        """Change a memory's content, type, importance or metadata."""
        record = memory.update_memory(memory_id, tenant.scope(user_id), **body.model_dump())
        return record_to_json(record, user_id)

    @router.delete("/memories/{memory_id}", response_model=models.DeletedOut, tags=["memories"])
    def forget(memory_id: str, user_id: str, tenant: Caller) -> dict[str, Any]:
        """Delete one memory (Memory.forget); ``deleted`` is false if there was none."""
        return {"deleted": memory.forget(memory_id, tenant.scope(user_id))}

    @router.post("/search", response_model=models.SearchOut, tags=["memories"])
    async def search(body: models.SearchIn, tenant: Caller) -> dict[str, Any]:
        """Search the user's long-term memories, best first (Memory.search)."""
        filters = body.filters.model_dump(exclude_none=True) if body.filters else None
        user = tenant.scope(body.user_id)
        hits = await memory.asearch(
            body.query, user, body.k, filters, mode=body.mode, min_score=body.min_score
        )
        return {"results": [hit_to_json(h, body.user_id) for h in hits]}

    @router.post("/context", response_model=models.ContextOut, tags=["context"])
    async def get_context(body: models.ContextIn, tenant: Caller) -> dict[str, Any]:
        """The context for a prompt, fitted to ``max_tokens``, with why each item is there."""
        user = tenant.scope(body.user_id)
        session = check_text_id(body.session_id, "session_id")
        if not memory.native_async and await metrics.alone():
            # the async twin would be this call in a thread: alone, no hop and no wake
            context = memory.get_context(body.query, user, session, body.max_tokens)
        else:  # natively (PostgreSQL) one round trip, alone too: less than the sync reads
            context = await memory.aget_context(body.query, user, session, body.max_tokens)
        return context_to_json(context)

    return router


MESSAGE_FIELDS = frozenset(f.name for f in dataclass_fields(Message) if not f.name.startswith("_"))


def _offset(cursor: str | None) -> int:
    if cursor is None or cursor == "":
        return 0
    if not (cursor.isascii() and cursor.isdigit()) or int(cursor) >= MAX_LIMIT:
        raise InputError("cursor", f"{cursor!r} is not a cursor", "pass next_cursor as it came")
    return int(cursor)


def _message_dict(raw: Mapping[str, Any], index: int) -> dict[str, Any]:
    """One message of a request: OpenAI's or tiermem's fields only (``id`` names the id)."""
    data = dict(raw)
    if "id" in data and "message_id" not in data:
        data["message_id"] = data.pop("id")
    refuse_unknown(
        data, MESSAGE_FIELDS, f"messages[{index}]", "a message field", SerializationError
    )
    return data
