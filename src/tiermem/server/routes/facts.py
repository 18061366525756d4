"""Facts extracted from conversations, with their history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tiermem.server import models
from tiermem.server.deps import ERROR_RESPONSES, Caller, PathUser
from tiermem.server.service import Service
from tiermem.wire import record_to_json


def router(service: Service) -> APIRouter:
    """The fact routes."""
    router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
    memory = service.memory

    @router.get("/users/{user_id}/facts", response_model=models.FactsOut, tags=["facts"])
    def facts(
        user_id: PathUser,
        tenant: Caller,
        current: bool = True,
        limit: models.QueryInt = 1000,
    ) -> dict[str, Any]:
        """Facts extracted from the user's conversations, newest first (Memory.facts)."""
        found = memory.facts(tenant.scope(user_id), current=current, limit=limit)
        return {"facts": [record_to_json(r, user_id) for r in found]}

    @router.get(
        "/users/{user_id}/facts/{memory_id}/history",
        response_model=models.VersionsOut,
        tags=["facts"],
    )
    def fact_history(user_id: PathUser, memory_id: str, tenant: Caller) -> dict[str, Any]:
        """Every version of a fact, oldest first (Memory.fact_history)."""
        versions = memory.fact_history(memory_id, tenant.scope(user_id))
        return {"versions": [record_to_json(r, user_id) for r in versions]}

    @router.post(
        "/users/{user_id}/facts/extract", response_model=models.ExtractedOut, tags=["facts"]
    )
    def extract_facts(user_id: PathUser, body: models.SessionIn, tenant: Caller) -> dict[str, Any]:
        """Extract facts from the session's unread messages now (Memory.extract_facts)."""
        return {"ids": memory.extract_facts(tenant.scope(user_id), body.session_id)}

    return router
