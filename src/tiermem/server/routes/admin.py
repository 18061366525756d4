"""API keys, under ``/v1/admin``: the admin key only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from tiermem.server import models
from tiermem.server.deps import ERROR_RESPONSES
from tiermem.server.service import Service


def router(service: Service) -> APIRouter:
    """The admin routes (keys)."""
    router = APIRouter(
        prefix="/v1/admin", responses=ERROR_RESPONSES, dependencies=[Depends(service.admin)]
    )

    @router.post("/keys", status_code=201, response_model=models.KeyCreatedOut, tags=["admin"])
    def create_key(body: models.KeyIn) -> dict[str, Any]:
        """A new key of a tenant; the key is in the answer once and never again."""
        key, token = service.keys.create(body.tenant, body.name)
        return {**key.to_dict(), "key": token}

    @router.get("/keys", response_model=models.KeysOut, tags=["admin"])
    def list_keys(tenant: str | None = None) -> dict[str, Any]:
        """Every key (of a tenant), without secrets."""
        return {"keys": [k.to_dict() for k in service.keys.list(tenant)]}

    @router.delete("/keys/{key_id}", response_model=models.DeletedOut, tags=["admin"])
    def revoke_key(key_id: str) -> dict[str, Any]:
        """Revoke a key: refused from the next request on, in every worker."""
        return {"deleted": service.keys.revoke(key_id)}

    return router
