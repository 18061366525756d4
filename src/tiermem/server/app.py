"""The HTTP app: :class:`~tiermem.Memory`'s operations under ``/v1``, for many tenants.

Every route calls the same public method an embedded program would call; the server
adds only what a service needs: keys and tenants (each tenant's users are a namespace of
the store), JSON errors with the right status, a body size limit, health, readiness and
Prometheus metrics, the MCP endpoint and the inspector page.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote

from tiermem.extras import needs_extra

with needs_extra("server", "tiermem.server", "the HTTP server"):
    import anyio
    from fastapi import APIRouter, Depends, FastAPI, Query, Request
    from fastapi import Path as PathParam
    from fastapi.responses import (
        FileResponse,
        JSONResponse,
        RedirectResponse,
        Response,
        StreamingResponse,
    )
    from prometheus_client import CONTENT_TYPE_LATEST
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send

from tiermem import __version__
from tiermem.errors import (
    InputError,
    InvalidTypeError,
    NotFoundError,
    SerializationError,
    TiermemError,
)
from tiermem.memory import Memory
from tiermem.messages import Message
from tiermem.server import models
from tiermem.server.body import DEFAULT_MAX_BODY, BodyGuard
from tiermem.server.commits import GroupCommit
from tiermem.server.errors import Forbidden, Unauthorized, install
from tiermem.server.keys import KeyStore, keys_location
from tiermem.server.metrics import Metrics
from tiermem.server.tenants import Tenant
from tiermem.stores.validate import MAX_LIMIT, check_text_id
from tiermem.wire import (
    context_to_json,
    hit_to_json,
    message_to_json,
    record_to_json,
    row_to_json,
    session_to_json,
    work_to_json,
)

ADMIN_KEY_ENV = "TIERMEM_ADMIN_KEY"
UI_DIR = Path(__file__).parent / "ui"
MESSAGE_FIELDS = frozenset(f.name for f in dataclass_fields(Message) if not f.name.startswith("_"))
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


async def _caller(request: Request) -> Tenant:
    """The request's tenant; a key is looked up in a thread (the lookup is a query)."""
    service: Service = request.app.state.service
    if "authorization" not in request.headers and not service.auth_required():
        return Tenant(None)  # development mode, without leaving the event loop
    return await anyio.to_thread.run_sync(service.tenant, request)


Caller = Annotated[Tenant, Depends(_caller)]


def _path_user(user_id: Annotated[str, PathParam()]) -> str:
    """A user id from the path, percent-decoded here (see :class:`RawUserPaths`)."""
    return unquote(user_id)


PathUser = Annotated[str, Depends(_path_user)]


class RawUserPaths:
    """ASGI middleware: ``/v1/users/{user_id}/...`` is routed on the path as sent, so an
    encoded ``/`` (``%2F``) in a user id stays inside its segment instead of splitting it
    (servers decode the path before routing); the route decodes the id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and scope["path"].startswith("/v1/users/"):
            scope = {**scope, "path": raw.decode("latin-1")}
        await self.app(scope, receive, send)


class Service:
    """What the routes share: the memory, the keys, the caller's tenant, and the group
    commit of added messages."""

    def __init__(self, memory: Memory, keys: KeyStore, admin_key: str | None) -> None:
        self.memory = memory
        self.keys = keys
        self.admin_key = admin_key
        self.commits = GroupCommit(memory.commit_staged)

    def auth_required(self) -> bool:
        """Keys are required once an admin key is configured or any key was created."""
        return self.admin_key is not None or self.keys.keys_exist()

    def _token(self, request: Request) -> str | None:
        header = request.headers.get("authorization")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("the Authorization header must read 'Bearer <key>'")
        return token.strip()

    def _is_admin(self, token: str) -> bool:
        return self.admin_key is not None and hmac.compare_digest(
            token.encode(), self.admin_key.encode()
        )

    def tenant(self, request: Request) -> Tenant:
        """The tenant of the request's key (development mode: no keys, tenant None)."""
        token = self._token(request)
        if token is None:
            if self.auth_required():
                raise Unauthorized(
                    "this server requires a key: send 'Authorization: Bearer tm_...'"
                )
            return Tenant(None)
        if self._is_admin(token):
            raise Forbidden("the admin key manages keys only; use a tenant's key for data")
        key = self.keys.verify(token)
        if key is None:
            raise Unauthorized("unknown or revoked key")
        return Tenant(key.tenant)

    def admin(self, request: Request) -> None:
        """Admin routes: the admin key, or any caller in development mode."""
        token = self._token(request)
        if token is not None and self._is_admin(token):
            return
        if token is None and not self.auth_required():
            return
        if token is not None and self.keys.verify(token) is not None:
            raise Forbidden("this route needs the admin key")
        raise Unauthorized(f"this route needs the admin key (set {ADMIN_KEY_ENV})")

    def note_user(self, tenant: Tenant, user_id: str) -> None:
        self.keys.note_user(tenant.name or "", user_id)

    def figures(self) -> dict[str, float | None]:
        """Process and store figures for /metrics (None: not known right now)."""
        try:
            size: float | None = float(self.memory.size())
            work = self.memory.work_stats()
            pending: float | None = float(work.pending)
            failed: float | None = float(work.failed)
        except TiermemError:
            size = pending = failed = None
        return {
            "queued_messages": float(self.memory.pending),
            "pending_work": pending,
            "failed_work": failed,
            "store_memories": size,
        }


def create_app(
    memory_or_config: Any = None,
    *,
    keys: KeyStore | str | None = None,
    admin_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
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
        max_body_bytes: larger request bodies are refused with 413.
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
        from tiermem.mcp import ALLOWED_HOSTS_ENV, HttpEndpoint

        extra_hosts = os.environ.get(ALLOWED_HOSTS_ENV, "")
        endpoint = HttpEndpoint(service, [h.strip() for h in extra_hosts.split(",") if h.strip()])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
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
    app.include_router(_routes(service))
    app.include_router(_admin_routes(service))
    app.include_router(_ops_routes(service, metrics))
    app.include_router(_archive_routes(service))
    if endpoint is not None:
        app.router.routes.append(Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"]))
    app.add_middleware(RawUserPaths)
    app.add_middleware(BodyGuard, max_bytes=max_body_bytes)
    app.add_middleware(metrics.middleware)
    return app


def _routes(service: Service) -> APIRouter:
    """The memory API: one route per Memory operation."""
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
    def list_memories(
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
        page = memory.list_memories(
            tenant.scope(user_id),
            limit=limit,
            offset=offset,
            memory_type=memory_type or None,
            session_id=session_id,
            agent_id=agent_id,
            created_after=created_after,
            created_before=created_before,
            metadata=_metadata_filter(metadata),
        )
        more = len(page) == limit and offset + limit < MAX_LIMIT
        return {
            "memories": [record_to_json(r, user_id) for r in page],
            "next_cursor": str(offset + limit) if more else None,
        }

    @router.get("/memories/{memory_id}", response_model=models.MemoryOut, tags=["memories"])
    def get_memory(memory_id: str, user_id: str, tenant: Caller) -> dict[str, Any]:
        """One memory of the user."""
        record = memory.get_memory(memory_id, tenant.scope(user_id))
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
    def search(body: models.SearchIn, tenant: Caller) -> dict[str, Any]:
        """Search the user's long-term memories, best first (Memory.search)."""
        filters = body.filters.model_dump(exclude_none=True) if body.filters else None
        hits = memory.search(
            body.query, tenant.scope(body.user_id), body.k, filters, mode=body.mode
        )
        return {"results": [hit_to_json(h, body.user_id) for h in hits]}

    @router.post("/context", response_model=models.ContextOut, tags=["context"])
    async def get_context(body: models.ContextIn, tenant: Caller) -> dict[str, Any]:
        """The context for a prompt, fitted to ``max_tokens``, with why each item is there."""
        user = tenant.scope(body.user_id)
        session = check_text_id(body.session_id, "session_id")
        # one thread hop: the answer is checked and encoded here, on the event loop
        context = await anyio.to_thread.run_sync(
            memory.get_context, body.query, user, session, body.max_tokens
        )
        return context_to_json(context)

    @router.get("/users", response_model=models.UsersOut, tags=["users"])
    def list_users(
        tenant: Caller, limit: models.QueryInt = 100, cursor: str = ""
    ) -> dict[str, Any]:
        """The users, by id: in development mode every user of the store (written by
        the library, the CLI or this server); with keys, the tenant's users that wrote
        through this server."""
        if not 1 <= limit <= 1000:
            raise InputError("limit", f"{limit} is outside [1, 1000]")
        if tenant.name is None:
            users = memory.users(limit, cursor)
        else:
            users = service.keys.users(tenant.name, limit, cursor)
        return {"users": users, "next_cursor": users[-1] if len(users) == limit else None}

    @router.get("/users/{user_id}/synopsis", response_model=models.SynopsisOut, tags=["users"])
    def synopsis(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """What is known about the user (Memory.synopsis)."""
        data: dict[str, Any] = memory.synopsis(tenant.scope(user_id)).to_dict()
        data["user_id"] = user_id
        return data

    @router.get("/users/{user_id}/sessions", response_model=models.SessionsOut, tags=["users"])
    def sessions(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """The user's sessions, most recently active first (Memory.sessions)."""
        found = memory.sessions(tenant.scope(user_id))
        return {"sessions": [session_to_json(s) for s in found]}

    @router.get("/users/{user_id}/messages", response_model=models.MessagesOut, tags=["users"])
    def history(user_id: PathUser, tenant: Caller, session_id: str | None = None) -> dict[str, Any]:
        """Every message of a session (none given: the messages without a session), in
        the order added, whole (Memory.history)."""
        messages = memory.history(tenant.scope(user_id), session_id)
        return {"messages": [message_to_json(m, user_id) for m in messages]}

    @router.get("/users/{user_id}/work", response_model=models.UserWorkOut, tags=["work"])
    def user_work(
        user_id: PathUser, tenant: Caller, limit: models.QueryInt = 100
    ) -> dict[str, Any]:
        """The user's messages waiting to be indexed, done, and failed with their error."""
        user = tenant.scope(user_id)
        stats = memory.work_stats(user)
        rows = memory.failed(user, limit) if stats.failed else []
        return {**work_to_json(stats), "rows": [row_to_json(r, user_id) for r in rows]}

    @router.post("/users/{user_id}/work/retry", response_model=models.RetriedOut, tags=["work"])
    def retry_failed(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """Queue the user's failed messages again (Memory.retry_failed)."""
        return {"retried": memory.retry_failed(tenant.scope(user_id))}

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

    @router.get("/users/{user_id}/recent", response_model=models.MessagesOut, tags=["users"])
    def recent(
        user_id: PathUser,
        tenant: Caller,
        session_id: str | None = None,
        limit: models.QueryInt = 20,
    ) -> dict[str, Any]:
        """The newest ``limit`` messages of a session, oldest first (Memory.recent)."""
        messages = memory.recent(tenant.scope(user_id), session_id, limit)
        return {"messages": [message_to_json(m, user_id) for m in messages]}

    @router.post("/users/{user_id}/synopsis", response_model=models.SynopsisOut, tags=["users"])
    def generate_synopsis(user_id: PathUser, tenant: Caller) -> dict[str, Any]:
        """Regenerate and cache the user's synopsis now (Memory.generate_synopsis)."""
        data: dict[str, Any] = memory.generate_synopsis(tenant.scope(user_id)).to_dict()
        data["user_id"] = user_id
        return data

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


def _archive_routes(service: Service) -> APIRouter:
    """A user's archive (docs/export.md): exported as a stream, restored in one go."""
    router = APIRouter(prefix="/v1", responses=ERROR_RESPONSES, tags=["users"])
    memory = service.memory

    @router.get(
        "/users/{user_id}/export",
        response_class=StreamingResponse,
        responses={200: {"content": {NDJSON: {}}}},
    )
    def export(user_id: PathUser, tenant: Caller, include_vectors: bool = False) -> Response:
        """The user's archive as JSON Lines, streamed (Memory.export)."""
        from tiermem.export import dumps

        scoped = tenant.scope(user_id)
        lines = memory.export(scoped, include_vectors=include_vectors)
        body = (dumps(_renamed(line, scoped, user_id)) + "\n" for line in lines)
        return StreamingResponse(body, media_type=NDJSON)

    @router.post("/users/{user_id}/import", response_model=models.ImportedOut)
    async def import_archive(user_id: PathUser, tenant: Caller, request: Request) -> Any:
        """Restore an archive (JSON Lines in the body; Memory.import_archive) as this user:
        all or nothing, and nothing twice; another user's archive is restored as a copy."""
        from tiermem.export import read_archive

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


def _admin_routes(service: Service) -> APIRouter:
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


def _ops_routes(service: Service, metrics: Metrics) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", response_model=models.StatusOut)
    def healthz() -> dict[str, Any]:
        """The process is up."""
        return {"status": "ok", "checks": {}}

    @router.get("/readyz", response_model=models.StatusOut, responses={503: {}})
    def readyz() -> Response:
        """The store, cache and model answer: the process can serve requests."""
        checks = {**service.memory.health(), "keys": _check(service.keys.keys_exist)}
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "unavailable", "checks": checks},
            status_code=200 if ready else 503,
            headers={} if ready else {"Retry-After": "5"},
        )

    @router.get("/metrics", response_class=Response)
    def prometheus() -> Response:
        """Prometheus metrics of this process."""
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @router.get("/ui", include_in_schema=False)
    def ui() -> FileResponse:
        return FileResponse(UI_DIR / "index.html")

    @router.get("/ui/{name}", include_in_schema=False)
    def ui_file(name: str) -> FileResponse:
        path = UI_DIR / name
        if name not in {p.name for p in UI_DIR.iterdir()}:
            raise NotFoundError(f"no file {name!r}")
        return FileResponse(path)

    @router.get("/docs", include_in_schema=False)
    def docs() -> FileResponse:
        """The API reference: /openapi.json rendered by a page with no external script."""
        return FileResponse(UI_DIR / "docs.html")

    @router.get("/redoc", include_in_schema=False)
    def redoc() -> RedirectResponse:
        return RedirectResponse("/docs")

    @router.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui")

    return router


def _check(probe: Callable[[], Any]) -> str:
    try:
        probe()
    except Exception as exc:  # readiness reports any failure; it never raises
        return f"{type(exc).__name__}: {exc}"[:300]
    return "ok"


def _metadata_filter(text: str | None) -> dict[str, Any] | None:
    """The ``metadata`` query parameter: a JSON object (its values are checked by the store)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SerializationError(
            "metadata", f"is not JSON: {exc}", 'pass a JSON object such as {"kind": "note"}'
        ) from exc
    if not isinstance(value, dict):
        raise InvalidTypeError("metadata", f"expected a JSON object, got {type(value).__name__}")
    return value


def _offset(cursor: str | None) -> int:
    if cursor is None or cursor == "":
        return 0
    if not cursor.isdigit() or int(cursor) >= MAX_LIMIT:
        raise InputError("cursor", f"{cursor!r} is not a cursor", "pass next_cursor as it came")
    return int(cursor)


def _message_dict(raw: Mapping[str, Any], index: int) -> dict[str, Any]:
    """One message of a request: OpenAI's or tiermem's fields only (``id`` names the id)."""
    data = dict(raw)
    if "id" in data and "message_id" not in data:
        data["message_id"] = data.pop("id")
    unknown = sorted(set(data) - MESSAGE_FIELDS)
    if unknown:
        raise SerializationError(
            f"messages[{index}].{unknown[0]}",
            "is not a message field",
            f"known fields are {', '.join(sorted(MESSAGE_FIELDS))}",
        )
    return data
