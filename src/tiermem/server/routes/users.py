"""A user's data: users, synopsis, sessions, messages, stats, erasure."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tiermem.server import models
from tiermem.server.deps import ERROR_RESPONSES, Caller, PathUser
from tiermem.server.service import Service
from tiermem.types.checks import check_limit
from tiermem.types.synopsis import Synopsis
from tiermem.wire import message_to_json, session_to_json


def router(service: Service) -> APIRouter:
    """The user routes: one per Memory operation on a user."""
    router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
    memory = service.memory

    @router.get("/users", response_model=models.UsersOut, tags=["users"])
    def list_users(
        tenant: Caller, limit: models.QueryInt = 100, cursor: str = ""
    ) -> dict[str, Any]:
        """The users, by id: in development mode every user of the store (written by
        the library, the CLI or this server); with keys, the tenant's users that wrote
        through this server."""
        if tenant.name is None:
            users = memory.users(limit, cursor)
        else:  # checked as Memory.users checks it
            users = service.keys.users(tenant.name, check_limit(limit), cursor)
        return {"users": users, "next_cursor": users[-1] if len(users) == limit else None}

    @router.get("/users/{user_id}/synopsis", response_model=models.SynopsisOut, tags=["users"])
    def synopsis(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """What is known about the user (Memory.synopsis)."""
        return _synopsis_json(memory.synopsis(tenant.scope(user_id)), user_id)

    @router.get("/users/{user_id}/sessions", response_model=models.SessionsOut, tags=["users"])
    async def sessions(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """The user's sessions, most recently active first (Memory.sessions)."""
        found = await memory.asessions(tenant.scope(user_id))
        return {"sessions": [session_to_json(s) for s in found]}

    @router.get(
        "/users/{user_id}/sessions/summary", response_model=models.RunningSummaryOut, tags=["users"]
    )
    def session_summary(
        user_id: PathUser, tenant: Caller, session_id: str | None = None
    ) -> dict[str, Any]:
        """The running summary of a session's messages older than the recent window (none
        given: the messages without a session), as a context offers it
        (Memory.session_summary)."""
        return {"summary": memory.session_summary(tenant.scope(user_id), session_id)}

    @router.get("/users/{user_id}/messages", response_model=models.MessagesOut, tags=["users"])
    def history(user_id: PathUser, tenant: Caller, session_id: str | None = None) -> dict[str, Any]:
        """Every message of a session (none given: the messages without a session), in
        the order added, whole (Memory.history)."""
        messages = memory.history(tenant.scope(user_id), session_id)
        return {"messages": [message_to_json(m, user_id) for m in messages]}

    @router.get("/users/{user_id}/stats", response_model=models.StatsOut, tags=["users"])
    def stats(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """Counts per memory type, time span, accesses and importance of the user."""
        figures = memory.stats(tenant.scope(user_id))
        return {
            "count": figures.count,
            "by_type": figures.by_type,
            "oldest": figures.oldest.isoformat() if figures.oldest else None,
            "newest": figures.newest.isoformat() if figures.newest else None,
            "total_access_count": figures.total_access_count,
            "mean_importance": figures.mean_importance,
        }

    @router.delete("/users/{user_id}", response_model=models.ErasedOut, tags=["users"])
    def forget_user(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """Erase everything of the user (Memory.forget_user); how many memories."""
        deleted = memory.forget_user(tenant.scope(user_id))
        service.keys.forget_user(tenant.name or "", user_id)
        return {"deleted": deleted}

    @router.get("/users/{user_id}/recent", response_model=models.MessagesOut, tags=["users"])
    async def recent(
        user_id: PathUser,
        tenant: Caller,
        session_id: str | None = None,
        limit: models.QueryInt = 20,
    ) -> dict[str, Any]:
        """The newest ``limit`` messages of a session, oldest first (Memory.recent)."""
        messages = await memory.arecent(tenant.scope(user_id), session_id, limit)
        return {"messages": [message_to_json(m, user_id) for m in messages]}

    @router.post("/users/{user_id}/synopsis", response_model=models.SynopsisOut, tags=["users"])
    def generate_synopsis(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """Regenerate and cache the user's synopsis now (Memory.generate_synopsis)."""
        return _synopsis_json(memory.generate_synopsis(tenant.scope(user_id)), user_id)

    @router.post("/users/{user_id}/sessions/end", response_model=models.SummaryOut, tags=["users"])
    def end_session(user_id: PathUser, body: models.SessionIn, tenant: Caller) -> dict[str, Any]:
        """Fold a session into its final summary (Memory.end_session)."""
        return {"summary": memory.end_session(tenant.scope(user_id), body.session_id)}

    @router.post(
        "/users/{user_id}/sessions/forget", response_model=models.ErasedOut, tags=["users"]
    )
    def forget_session(user_id: PathUser, body: models.SessionIn, tenant: Caller) -> dict[str, Any]:
        """Delete a session: its messages, summary and index lines (Memory.forget_session)."""
        return {"deleted": memory.forget_session(tenant.scope(user_id), body.session_id)}

    @router.post(
        "/users/{user_id}/messages/forget", response_model=models.ErasedOut, tags=["users"]
    )
    def forget_messages(
        user_id: PathUser, body: models.MessageIdsIn, tenant: Caller
    ) -> dict[str, Any]:
        """Delete these messages of the user (Memory.forget_messages); how many went."""
        return {"deleted": memory.forget_messages(tenant.scope(user_id), body.message_ids)}

    return router


def _synopsis_json(synopsis: Synopsis, user_id: str) -> dict[str, Any]:
    """A synopsis as the API shows it: under the caller's name for the user."""
    return {**synopsis.to_dict(), "user_id": user_id}
