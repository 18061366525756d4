"""The MCP server: a user's memory as tools for MCP clients (desktop apps, agent frameworks).

The tools (``add_memory``, ``search_memory``, ``get_context``, ``get_message``,
``list_memories``, ``list_facts``, ``fact_history``, ``forget_memory``) call the same
:class:`~tiermem.Memory` methods as the HTTP routes.
The user is never a tool argument: the model cannot choose whose memory it reads. Over
stdio (``tiermem mcp --user ID``) the command line fixes it; over streamable HTTP
(``/mcp`` on ``tiermem serve``) the key fixes the tenant and the client's configured
``X-Tiermem-User`` header the user.

Needs the ``server`` extra (the official ``mcp`` SDK).
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

from tiermem.extras import needs_extra

with needs_extra("server", "tiermem.server.mcp", "the MCP server"):
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from pydantic import Field, ValidationError
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.types import Receive, Scope, Send

from tiermem._version import __version__
from tiermem.errors import InputError, TiermemError, refuse_unknown
from tiermem.types.checks import MAX_CONTEXT_TOKENS
from tiermem.wire import error_name, problem_to_error

if TYPE_CHECKING:
    from tiermem.server.service import Service

USER_HEADER = "x-tiermem-user"
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
ALLOWED_HOSTS_ENV = "TIERMEM_MCP_ALLOWED_HOSTS"
"""Comma-separated extra Host values /mcp accepts (``memory.example.com``, ``10.0.0.5:*``)."""
DEFAULT_USER = "default"
RPC_SERVER_ERROR = -32001
"""The JSON-RPC code of a request the HTTP layer refused (no key, a revoked key, ...)."""
INSTRUCTIONS = """\
Long-term memory of the user you are talking with. Call get_context at the start of a
task with the user's request to recall what matters (recent conversation, relevant
memories, what is known about the user). Call add_memory when the user states a lasting
fact, preference or goal worth remembering in later conversations; write it as a short,
self-contained sentence with names and dates resolved ("Prefers tea over coffee", not
"likes it"). Use search_memory to look something specific up, list_memories to review,
and forget_memory when the user asks you to forget something or a memory is wrong.
When the context shows an excerpt of a long message (it names the message's id) and you
need the rest, call get_message with that id."""

MemoryType = Literal["fact", "preference", "context", "summary", "tool"]
# strict: true is not 1, and "5" or 5.0 is not an int (as the library and REST refuse them)
SearchK = Annotated[int, Field(strict=True, ge=1, le=50)]
ListLimit = Annotated[int, Field(strict=True, ge=1, le=200)]
Importance = Annotated[float, Field(strict=True, ge=0, le=1)]
MaxTokens = Annotated[int, Field(strict=True, ge=1, le=MAX_CONTEXT_TOKENS)]
MinScore = Annotated[float, Field(strict=True, ge=0, le=1)]
Resolver = Callable[[Any], tuple[Any, str]]
"""(the HTTP request, or None over stdio) -> (a Memory or MemoryClient, the store's user id)"""


def _memory_json(record: Any) -> dict[str, Any]:
    return {
        "id": str(record.id),
        "content": record.content,
        "memory_type": record.memory_type,
        "created_at": record.created_at.isoformat(),
    }


def _message_json(message: Any) -> dict[str, Any]:
    """A message whole (``Message.to_dict()``), its session beside it; the stored user id
    is left out (the server fixes the user)."""
    data: dict[str, Any] = message.to_dict()
    metadata = {k: v for k, v in data.pop("metadata").items() if k != "user_id"}
    data["session_id"] = metadata.pop("session_id", None)
    if metadata:
        data["metadata"] = metadata
    return data


def _excerpt(item: Any) -> dict[str, Any]:
    """An excerpt's message id (get_message's argument), on an item that is one."""
    message_id, span = getattr(item, "message_id", None), getattr(item, "span", None)
    return {"message_id": message_id, "span": list(span)} if message_id and span else {}


def _version_json(record: Any) -> dict[str, Any]:
    """A fact's version: the memory and until when it held (None: it holds now)."""
    return {**_memory_json(record), "valid_until": record.metadata.get("valid_until")}


def _hit_json(hit: Any) -> dict[str, Any]:
    """A search hit: its relevance in [0, 1], and what it was made of."""
    data = {**_memory_json(hit.record), "score": round(hit.score, 4)}
    if hit.evidence is not None:
        data["evidence"] = {
            k: round(v, 4) if isinstance(v, float) else v for k, v in hit.evidence.to_dict().items()
        }
    return data


def tool_error(exc: TiermemError) -> ToolError:
    """What the model reads: ``ErrorClass: field: problem (fix)`` (the class a client
    raises: ``ProviderUnavailableError`` for a ``CircuitOpenError``)."""
    return ToolError(f"{error_name(exc)}: {exc}")


class TypedServer(MCPServer):
    """An MCPServer whose every refused call reads like tiermem's typed errors: arguments
    the schema does not name, or values outside it, are an :class:`InputError` naming
    the field, never pydantic's text."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> Any:
        await self._refuse_unknown(name, arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:  # the SDK's text is "Error executing tool <name>: ..."
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                where = f"the input schema of {name}"
                raise tool_error(problem_to_error(cause.errors()[0], where)) from None
            if isinstance(cause, ToolError):  # one of ours, already typed
                raise ToolError(str(cause)) from None
            raise

    async def _refuse_unknown(self, name: str, arguments: dict[str, Any]) -> None:
        """An argument the tool does not have is refused, not ignored (a model that
        passes ``user`` must learn that it cannot choose the user)."""
        schema = next((t.input_schema for t in await self.list_tools() if t.name == name), None)
        if schema is None:
            return  # an unknown tool: the SDK names it
        known, what = schema.get("properties", {}), f"an argument of {name}"
        try:
            refuse_unknown(arguments, known, "", what, InputError)
        except InputError as exc:  # the hint also says why no argument names the user
            hint = f"{exc.hint}; the server fixes the user"
            raise tool_error(InputError(exc.field, exc.problem, hint)) from None


def build_server(resolve: Resolver) -> MCPServer:
    """The MCP server whose tools act for the user ``resolve`` names."""
    server: MCPServer = TypedServer(
        "tiermem", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    async def run(ctx: Context, action: Callable[[Any, str], Any]) -> Any:
        try:
            memory, user = resolve(getattr(ctx.request_context, "request", None))
            return await anyio.to_thread.run_sync(functools.partial(action, memory, user))
        except TiermemError as exc:  # the model sees the typed error, its field and fix
            raise tool_error(exc) from exc

    @server.tool()
    async def add_memory(
        content: str, ctx: Context, memory_type: MemoryType = "fact", importance: Importance = 0.5
    ) -> dict[str, Any]:
        """Remember a lasting fact, preference or goal of the user for later conversations.

        Args:
            content: one short, self-contained sentence ("Is allergic to peanuts").
            memory_type: fact (default), preference, context (current goals, projects),
                summary or tool.
            importance: 0 to 1; 0.5 unless it matters more (allergies, names) or less.
        """
        memory_id = await run(ctx, lambda m, u: m.remember(content, u, memory_type, importance))
        return {"id": memory_id}

    @server.tool()
    async def search_memory(
        query: str, ctx: Context, k: SearchK = 5, min_score: MinScore = 0.0
    ) -> dict[str, Any]:
        """Search the user's memories (meaning and keywords), best first. Each result's
        score is its relevance from 0 to 1, whatever else is stored: under 0.1 it very
        likely does not answer, over 0.9 it very likely does.

        Args:
            query: what to look for, in plain words.
            k: how many results at most (1 to 50).
            min_score: leave out results that score less (0 to 1); 0.2 keeps nearly
                all that answers and leaves out what is unrelated.
        """
        hits = await run(ctx, lambda m, u: m.search(query, u, k=k, min_score=min_score))
        return {"results": [_hit_json(h) for h in hits]}

    @server.tool()
    async def get_context(
        query: str, ctx: Context, max_tokens: MaxTokens = 1000, session_id: str | None = None
    ) -> dict[str, Any]:
        """Recall what matters for a request: recent messages, relevant memories and what
        is known about the user, fitted to a token budget.

        Args:
            query: the request or the task at hand, in plain words.
            max_tokens: the most tokens the recalled context may take.
            session_id: the conversation, when the client keeps several.
        """
        context = await run(ctx, lambda m, u: m.get_context(query, u, session_id, max_tokens))
        found = {
            "context": context.text(),
            "total_tokens": context.total_tokens,
            "items": [
                {
                    "section": i.section,
                    "source": i.source,
                    "score": round(i.score, 4),
                    "tokens": i.tokens,
                    **_excerpt(i),
                }
                for i in context.items
            ],
        }
        if context.degraded:  # what was down: the context was built without it
            found["degraded"] = context.degraded
        return found

    @server.tool()
    async def get_message(message_id: str, ctx: Context) -> dict[str, Any]:
        """Read one message of the conversation whole. Call it when a line of the context
        is marked as an excerpt of a message (it names the message's id) and you need
        the rest: the full log, document or code the excerpt was cut from.

        Args:
            message_id: the message's id, as the context's excerpt names it.
        """
        message = await run(ctx, lambda m, u: m.get_message(message_id, user_id=u))
        return {"message": _message_json(message)}

    @server.tool()
    async def list_memories(
        ctx: Context, limit: ListLimit = 20, memory_type: MemoryType | None = None
    ) -> dict[str, Any]:
        """The user's newest memories.

        Args:
            limit: how many (1 to 200).
            memory_type: only this kind (fact, preference, context, summary, tool).
        """
        records = await run(
            ctx, lambda m, u: m.list_memories(u, limit=limit, memory_type=memory_type)
        )
        return {"memories": [_memory_json(r) for r in records]}

    @server.tool()
    async def list_facts(ctx: Context, limit: ListLimit = 20) -> dict[str, Any]:
        """Facts read from the user's conversations, as they hold now, newest first.

        Args:
            limit: how many (1 to 200).
        """
        records = await run(ctx, lambda m, u: m.facts(u, limit=limit))
        return {"facts": [_memory_json(r) for r in records]}

    @server.tool()
    async def fact_history(memory_id: str, ctx: Context) -> dict[str, Any]:
        """Every version of a fact, oldest first, with until when each held: use it when
        asked what was true before ("where did I live before Porto?").

        Args:
            memory_id: the fact's id, as list_facts or search_memory gave it.
        """
        versions = await run(ctx, lambda m, u: m.fact_history(memory_id, u))
        return {"versions": [_version_json(v) for v in versions]}

    @server.tool()
    async def forget_memory(memory_id: str, ctx: Context) -> dict[str, Any]:
        """Delete one memory of the user, by the id search_memory or list_memories gave.

        Args:
            memory_id: the memory's id.
        """
        return {"deleted": await run(ctx, lambda m, u: m.forget(memory_id, u))}

    return server


def run_stdio(memory: Any, user_id: str) -> None:
    """Serve ``user_id``'s memory over stdio until the client disconnects."""
    build_server(lambda request: (memory, user_id)).run("stdio")


class HttpEndpoint:
    """``/mcp`` on the HTTP server: key checked first, then streamable HTTP (stateless,
    JSON answers, so any worker can answer any request)."""

    def __init__(self, service: Service, allowed_hosts: Sequence[str] = ()) -> None:
        from mcp.server.transport_security import TransportSecuritySettings

        self.service = service
        self.server = build_server(self._resolve)
        hosts = [*LOOPBACK_HOSTS, *allowed_hosts]
        self.server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=hosts,
                allowed_origins=[f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")],
            ),
        )

    def _resolve(self, request: Any) -> tuple[Any, str]:
        tenant = request.state.tiermem_tenant
        user = request.headers.get(USER_HEADER) or DEFAULT_USER
        return self.service.memory, tenant.scope(user, USER_HEADER)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from tiermem.server.errors import error_response

        try:
            tenant = await anyio.to_thread.run_sync(self.service.tenant, Request(scope))
        except TiermemError as exc:
            await _rpc_error(error_response(exc), exc)(scope, receive, send)
            return
        scope.setdefault("state", {})["tiermem_tenant"] = tenant
        await self.server.session_manager.handle_request(scope, receive, send)


def _rpc_error(answer: JSONResponse, exc: TiermemError) -> JSONResponse:
    """An HTTP error answered as a JSON-RPC error, so the MCP client shows its text: the
    status and headers stay the HTTP API's, the typed error body is the error's ``data``."""
    data = json.loads(bytes(answer.body))
    error = {"code": RPC_SERVER_ERROR, "message": f"{data['error']}: {exc}", "data": data}
    headers = {
        k: v for k, v in answer.headers.items() if k.lower() in ("www-authenticate", "retry-after")
    }
    body = {"jsonrpc": "2.0", "id": None, "error": error}
    return JSONResponse(body, status_code=answer.status_code, headers=headers)
