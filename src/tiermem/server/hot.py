"""The two calls an agent makes on every turn, ``POST /v1/messages`` and ``POST
/v1/context``, answered without FastAPI's per-request machinery.

For every request FastAPI matches the route among all of them, solves its dependencies,
parses the body, validates it, then checks the answer against the response model and
encodes it: generic code that costs the event loop about as much CPU as the rest of a
message's request path together (docs/notes/2026-11-28-server.md). For these two routes this
middleware takes the same steps directly: the body model's own JSON validator, the
caller's tenant (:func:`~tiermem.server.deps.caller`), the route's own endpoint (the
function FastAPI registered, which it still documents in ``/openapi.json``), the answer
encoded by pydantic-core (the endpoint builds it from the library's own records).

A body the model refuses, or one not sent as JSON, goes on to FastAPI, so every such
error is answered exactly as before; an error the endpoint raises is answered by the
app's own handler (:func:`~tiermem.server.errors.typed_error`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tiermem.errors import TiermemError
from tiermem.server.deps import caller
from tiermem.server.errors import typed_error

HOT_PATHS = ("/v1/messages", "/v1/context")
"""The POST routes answered here (each endpoint takes ``body`` and ``tenant``)."""

JSON_HEADER = (b"content-type", b"application/json")


@dataclass(frozen=True)
class _Route:
    route: APIRoute
    model: type[BaseModel]
    endpoint: Callable[..., Awaitable[Any]]
    status: int


def _hot_route(route: APIRoute) -> _Route:
    """The body model and endpoint of a hot route (refused unless its endpoint takes just
    ``body``, a model, and ``tenant``)."""
    parameters = inspect.signature(route.endpoint, eval_str=True).parameters
    model = parameters["body"].annotation if "body" in parameters else None
    if list(parameters) != ["body", "tenant"] or not (
        isinstance(model, type) and issubclass(model, BaseModel)
    ):
        raise TypeError(f"{route.path}: a hot route's endpoint takes (body: Model, tenant)")
    if not inspect.iscoroutinefunction(route.endpoint):
        raise TypeError(f"{route.path}: a hot route's endpoint is async")
    return _Route(route, model, route.endpoint, route.status_code or 200)


def _is_json(scope: Scope) -> bool:
    """Whether the request says its body is JSON (``application/json``, any parameters)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value.split(b";", 1)[0].strip().lower() == b"application/json")
    return False


class HotRoutes:
    """ASGI middleware: answers the :data:`HOT_PATHS` POSTs of ``routes`` (the app's API
    routes) itself; everything else, and any body the route's model refuses, goes on to
    ``app``. It runs after :class:`~tiermem.server.body.BodyGuard` (the body is whole and
    checked) and sets ``scope["route"]`` as the router would (for the metrics)."""

    def __init__(self, app: ASGIApp, routes: list[Any]) -> None:
        self.app = app
        self.routes = {
            r.path: _hot_route(r)
            for r in routes
            if isinstance(r, APIRoute) and r.path in HOT_PATHS and "POST" in (r.methods or ())
        }
        if set(self.routes) != set(HOT_PATHS):
            raise TypeError(f"the app has no POST route for each of {HOT_PATHS}")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = self.routes.get(scope["path"]) if scope["type"] == "http" else None
        if hot is None or scope["method"] != "POST" or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        message = await receive()  # BodyGuard's replay: the whole body at once
        if message["type"] != "http.request":
            return
        try:
            body = hot.model.model_validate_json(message.get("body", b""))
        except ValidationError:  # FastAPI answers it, as for any route
            await self.app(scope, _replay(message, receive), send)
            return
        scope["route"] = hot.route
        request = Request(scope, receive)
        try:
            answer = await hot.endpoint(body=body, tenant=await caller(request))
        except TiermemError as exc:
            await (await typed_error(request, exc))(scope, receive, send)
            return
        data = to_json(answer)
        await send(
            {
                "type": "http.response.start",
                "status": hot.status,
                "headers": [(b"content-length", str(len(data)).encode()), JSON_HEADER],
            }
        )
        await send({"type": "http.response.body", "body": data})


def _replay(message: Message, receive: Receive) -> Receive:
    """``receive`` that gives ``message`` first."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return message
        return await receive()

    return replay
