"""What the routes share: the caller's tenant, ids from the path, the error responses."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import unquote

from tiermem.extras import needs_extra

with needs_extra("server", "tiermem.server", "the HTTP server"):
    import anyio
    from fastapi import Depends, Request
    from fastapi import Path as PathParam

from tiermem.server import models
from tiermem.server.service import Service
from tiermem.server.tenants import Tenant

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": models.ErrorOut, "description": text}
    for code, text in (
        (401, "no key, or an unknown or revoked key"),
        (403, "a key that may not do this"),
        (404, "no such memory or route"),
        (409, "the operation is disabled in the server's configuration"),
        (413, "the body or a content is too large"),
        (422, "a value is missing, of the wrong type or out of range"),
        (429, "a model provider is rate limiting the server: retry after Retry-After seconds"),
        (502, "a model provider failed or refused the server's credentials"),
        (503, "the store, cache or model is unavailable: retry after Retry-After seconds"),
    )
}


async def caller(request: Request) -> Tenant:
    """The request's tenant; a key is looked up in a thread (the lookup is a query)."""
    service: Service = request.app.state.service
    if "authorization" not in request.headers and not service.auth_required():
        return Tenant(None)  # development mode, without leaving the event loop
    return await anyio.to_thread.run_sync(service.tenant, request)


Caller = Annotated[Tenant, Depends(caller)]


def _path_user(user_id: Annotated[str, PathParam()]) -> str:
    """A user id from the path, percent-decoded here (see :class:`RawIdPaths`)."""
    return unquote(user_id)


PathUser = Annotated[str, Depends(_path_user)]


def _path_message(message_id: Annotated[str, PathParam()]) -> str:
    """A message id from the path, percent-decoded here (see :class:`RawIdPaths`)."""
    return unquote(message_id)


PathMessage = Annotated[str, Depends(_path_message)]
