"""A user's archive (docs/export.md): exported as a stream, restored in one go."""

from __future__ import annotations

import json
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from tiermem.server import models
from tiermem.server.deps import ERROR_RESPONSES, Caller, PathUser
from tiermem.server.service import Service


def router(service: Service) -> APIRouter:
    """The archive routes: export and import."""
    router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES, tags=["users"])
    memory = service.memory

    @router.get(
        "/users/{user_id}/export",
        response_class=StreamingResponse,
        responses={200: {"content": {NDJSON: {}}}},
    )
    def export(user_id: PathUser, tenant: Caller, include_vectors: bool = False) -> Response:
        """The user's archive as JSON Lines, streamed (Memory.export)."""
        from tiermem.memory.export import dumps

        scoped = tenant.scope(user_id)
        lines = memory.export(scoped, include_vectors=include_vectors)
        body = (dumps(_renamed(line, scoped, user_id)) + "\n" for line in lines)
        return StreamingResponse(body, media_type=NDJSON)

    @router.post("/users/{user_id}/import", response_model=models.ImportedOut)
    async def import_archive(user_id: PathUser, tenant: Caller, request: Request) -> Any:
        """Restore an archive (JSON Lines in the body; Memory.import_archive) as this user:
        all or nothing, and nothing twice; another user's archive is restored as a copy."""
        from tiermem.memory.export import read_archive

        scoped = tenant.scope(user_id)
        text = (await request.body()).decode("utf-8", errors="replace")
        lines = [line for line in text.splitlines() if line.strip()]
        owner = read_archive(lines).header["user_id"]  # checked whole before any write
        stored = tenant.scope(owner, "line 1.user_id")
        restored = [_renamed(line, owner, stored) for line in map(_parsed, lines)]
        added = await anyio.to_thread.run_sync(memory.import_archive, restored, scoped)
        service.note_user(tenant, user_id)
        return added

    return router


NDJSON = "application/x-ndjson"


def _parsed(line: str) -> Any:
    """A JSON line as its object (read_archive already refused what is not JSON)."""
    return json.loads(line)


def _renamed(line: dict[str, Any], scoped: str, user_id: str) -> dict[str, Any]:
    """An archive line naming ``user_id`` where it says ``scoped`` (the store's id as the
    caller's on export, and back on import)."""

    def own(metadata: Any) -> Any:
        if isinstance(metadata, dict) and metadata.get("user_id") == scoped:
            return {**metadata, "user_id": user_id}
        return metadata

    line = {**line, "metadata": own(line["metadata"])} if "metadata" in line else dict(line)
    if line.get("user_id") == scoped:
        line["user_id"] = user_id
    message = line.get("message")
    if isinstance(message, dict):
        line["message"] = {**message, "metadata": own(message.get("metadata"))}
    return line
