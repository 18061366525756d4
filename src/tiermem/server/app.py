"""The HTTP app: :class:`~tiermem.Memory`'s operations under ``/v1``, for many tenants.

Every route calls the same public method an embedded program would call; the server
adds only what a service needs: keys and tenants (each tenant's users are a namespace of
the store), JSON errors with the right status, a body size limit, health, readiness and
Prometheus metrics, the MCP endpoint and the inspector page.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from tiermem.extras import needs_extra

with needs_extra("server", "tiermem.server", "the HTTP server"):
    import anyio
    from fastapi import FastAPI
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send

from tiermem._version import __version__
from tiermem.memory import Memory
from tiermem.server.body import BodyGuard, body_limit
from tiermem.server.errors import install
from tiermem.server.hot import HotRoutes
from tiermem.server.keys import KeyStore, keys_location
from tiermem.server.metrics import Metrics
from tiermem.server.routes import admin, archives, facts, memories, ops, users, work
from tiermem.server.service import ADMIN_KEY_ENV, Service

RAW_ID_PATHS = ("/v1/users/", "/v1/messages/")
"""Paths whose next segment is an id of the caller's choosing (any text)."""


class RawIdPaths:
    """ASGI middleware: ``/v1/users/{user_id}/...`` and ``/v1/messages/{message_id}`` are
    routed on the path as sent, so an encoded ``/`` (``%2F``) in an id stays inside its
    segment instead of splitting it (servers decode the path before routing); the route
    decodes the id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and scope["path"].startswith(RAW_ID_PATHS):
            scope = {**scope, "path": raw.decode("latin-1")}
        await self.app(scope, receive, send)


ASYNC_THREADS = 40
"""Threads of the server loop's default executor (where ``asyncio.to_thread`` runs)."""


def create_app(
    memory_or_config: Any = None,
    *,
    keys: KeyStore | str | None = None,
    admin_key: str | None = None,
    max_body_bytes: int | None = None,
    mcp: bool = True,
    own_memory: bool | None = None,
) -> FastAPI:
    """The FastAPI app serving a :class:`Memory`.

    Args:
        memory_or_config: a Memory, or what ``Memory(config=...)`` takes (None: the
            embedded default).
        keys: the key store, or its location (a SQLite path or ``postgresql://`` URL);
            default: the store's own database.
        admin_key: the key that manages keys over ``/v1/admin/keys`` (default: the
            ``TIERMEM_ADMIN_KEY`` environment variable).
        max_body_bytes: larger request bodies are refused with 413 (default: room for
            one message of ``memory.max_message_chars`` in any UTF-8 text, plus 4 MiB;
            see :func:`~tiermem.server.body.body_limit`).
        mcp: serve the MCP tools over streamable HTTP at ``/mcp``.
        own_memory: close the Memory at shutdown (default: only one the app built).
    """
    if isinstance(memory_or_config, Memory):
        memory, owns_memory = memory_or_config, bool(own_memory)
    else:
        memory, owns_memory = Memory(config=memory_or_config), own_memory is not False
    keystore = (
        keys
        if isinstance(keys, KeyStore)
        else KeyStore(keys or keys_location(memory.config, memory.location))
    )
    service = Service(memory, keystore, admin_key or os.environ.get(ADMIN_KEY_ENV) or None)
    endpoint = None
    if mcp:
        from tiermem.server.mcp import ALLOWED_HOSTS_ENV, HttpEndpoint

        extra_hosts = os.environ.get(ALLOWED_HOSTS_ENV, "")
        endpoint = HttpEndpoint(service, [h.strip() for h in extra_hosts.split(",") if h.strip()])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Memory's async twins that run in a thread (SQLite; writes) get as many threads
        # as the sync routes (anyio's 40), not asyncio's default (a few per core)
        threads = ThreadPoolExecutor(ASYNC_THREADS, thread_name_prefix="tiermem-async")
        asyncio.get_running_loop().set_default_executor(threads)
        try:
            if endpoint is not None:
                async with endpoint.running():  # the MCP session manager's task group
                    yield
            else:
                yield
        finally:
            await anyio.to_thread.run_sync(service.commits.close)  # what is queued is written
            if owns_memory:
                await memory.aclose()
            if not isinstance(keys, KeyStore):
                keystore.close()

    app = FastAPI(
        title="tiermem",
        version=__version__,
        description="Tiered memory for LLM agents, as a service. Errors are "
        "{error, field, message, fix}; error names the tiermem.errors class.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN: ours work offline
        redoc_url=None,
    )
    app.state.service = service
    install(app)
    metrics = Metrics(service.figures)
    memory_routes = memories.router(service, metrics)
    app.include_router(memory_routes)
    app.include_router(users.router(service))
    app.include_router(work.router(service))
    app.include_router(facts.router(service))
    app.include_router(admin.router(service))
    app.include_router(ops.router(service, metrics))
    app.include_router(archives.router(service))
    if endpoint is not None:
        app.router.routes.append(Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"]))
    app.add_middleware(RawIdPaths)
    app.add_middleware(HotRoutes, routes=memory_routes.routes)
    if max_body_bytes is None:
        max_body_bytes = body_limit(memory.config.memory.max_message_chars)
    app.add_middleware(BodyGuard, max_bytes=max_body_bytes)
    app.add_middleware(metrics.middleware)
    return app
