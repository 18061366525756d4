"""Background work: what is pending, done or failed, retries, flush."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tiermem.server import models
from tiermem.server.deps import ERROR_RESPONSES, Caller, PathUser
from tiermem.server.service import Service
from tiermem.types.checks import check_limit
from tiermem.wire import row_to_json, work_to_json


def router(service: Service) -> APIRouter:
    """The work routes: the store's queue, per user and in all."""
    router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES)
    memory = service.memory

    @router.get("/users/{user_id}/work", response_model=models.UserWorkOut, tags=["work"])
    def user_work(
        user_id: PathUser, tenant: Caller, limit: models.QueryInt = 100
    ) -> dict[str, Any]:
        """The user's messages waiting to be indexed, done, and failed with their error."""
        user = tenant.scope(user_id)
        check_limit(limit)  # checked as Memory.failed checks it, even when none failed
        stats = memory.work_stats(user)
        rows = memory.failed(user, limit) if stats.failed else []
        return {**work_to_json(stats), "rows": [row_to_json(r, user_id) for r in rows]}

    @router.post("/users/{user_id}/work/retry", response_model=models.RetriedOut, tags=["work"])
    def retry_failed(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """Queue the user's failed messages again (Memory.retry_failed)."""
        return {"retried": memory.retry_failed(tenant.scope(user_id))}

    @router.post("/flush", response_model=models.FlushOut, tags=["work"])
    def flush(tenant: Caller, body: models.FlushIn | None = None) -> dict[str, Any]:
        """Wait until the store's pending work (embedding, summaries) is done."""
        return {"done": memory.flush(body.timeout if body else 10.0)}

    @router.get("/work", response_model=models.WorkOut, tags=["work"])
    def work(tenant: Caller) -> dict[str, Any]:
        """This process's queue (used when messages are not committed at once) and, in
        development mode, every user's messages pending, done and failed."""
        return {
            **memory.queue_status(),
            "store": work_to_json(memory.work_stats()) if tenant.name is None else None,
        }

    return router
