"""Errors as HTTP answers: ``{error, field, message, fix}`` with the status the error means.

The caller's mistakes are 4xx (never 500); a store that cannot be reached is 503 with
``Retry-After``, so a client backs off and retries instead of losing its data.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from tiermem import errors
from tiermem.wire import error_to_json, problem_to_error

RETRY_AFTER_SECONDS = 5
log = logging.getLogger("tiermem.server")

# The most specific class wins: the first entry the error is an instance of.
STATUS: tuple[tuple[type[errors.TiermemError], int], ...] = (
    (errors.ContentTooLargeError, 413),
    (errors.ConfigError, 409),
    (errors.InputError, 422),
    (errors.NotFoundError, 404),
    (errors.RateLimitError, 429),
    (errors.ProviderError, 502),
    (errors.StoreError, 503),
    (errors.CacheError, 503),
    (errors.ModelLoadError, 503),
)


class Unauthorized(errors.AuthenticationError):
    """The caller's key is missing, unknown or revoked (401). A provider's
    AuthenticationError (the server's own model key refused) is a 502 instead."""


class Forbidden(Unauthorized):
    """A valid key that may not do this (a tenant key on an admin route)."""


def status_of(exc: errors.TiermemError) -> int:
    if isinstance(exc, Unauthorized):
        return 403 if isinstance(exc, Forbidden) else 401
    return next((code for cls, code in STATUS if isinstance(exc, cls)), 500)


def error_response(exc: errors.TiermemError) -> JSONResponse:
    status = status_of(exc)
    body = error_to_json(exc)
    if isinstance(exc, Unauthorized):
        body["error"] = "AuthenticationError"  # the client raises tiermem's own class
    headers = {}
    if status in (503, 429):
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status_code=status, headers=headers)


def _malformed_json(problem: dict[str, Any]) -> errors.SerializationError:
    """FastAPI's ``json_invalid`` locates the problem as ``("body", offset)``."""
    where = [p for p in problem.get("loc", ()) if isinstance(p, int)]
    reason = str((problem.get("ctx") or {}).get("error") or "cannot be parsed")
    at = f" at character {where[0]}" if where else ""
    return errors.SerializationError(
        "body", f"is not valid JSON: {reason}{at}", "send one JSON object, UTF-8 encoded"
    )


def _validation_error(exc: RequestValidationError) -> errors.InputError:
    """The first problem pydantic found, as the typed error a library call would raise."""
    problem: dict[str, Any] = exc.errors()[0] if exc.errors() else {}
    if str(problem.get("type", "")).startswith("json"):
        return _malformed_json(problem)
    return problem_to_error(problem, "/openapi.json")


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route of this path answers, probed through each route's own
    ``matches`` (FastAPI nests included routers, so a route's methods are not listed at
    the top level)."""
    routes = request.app.router.routes
    return [
        method
        for method in HTTP_METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes
        )
    ]


async def typed_error(request: Request, exc: errors.TiermemError) -> JSONResponse:
    """The answer to a typed error a route raised (logged when it is the server's)."""
    if status_of(exc) >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
    return error_response(exc)


def install(app: FastAPI) -> None:
    """Answer every error as JSON with its typed name."""
    app.add_exception_handler(errors.TiermemError, typed_error)  # type: ignore[arg-type]

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(_validation_error(exc))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400:  # a body FastAPI could not parse (not UTF-8 JSON)
            return error_response(
                errors.SerializationError("body", str(exc.detail), "send UTF-8 JSON")
            )
        name = "NotFoundError" if exc.status_code == 404 else "InputError"
        body = {"error": name, "field": None, "message": str(exc.detail), "fix": ""}
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # Starlette's Allow is empty under FastAPI's nested routers
            allowed = ", ".join(_allowed_methods(request))
            headers["Allow"] = allowed
            body["message"] = f"{request.method} is not a method of {request.url.path}"
            body["fix"] = f"use {allowed}"
        return JSONResponse(body, status_code=exc.status_code, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, RuntimeError) and "closed" in str(exc):  # shutting down
            return error_response(errors.StoreUnavailableError("the server is shutting down"))
        log.exception("%s %s failed", request.method, request.url.path)
        body = {"error": "TiermemError", "field": None, "message": "internal error", "fix": ""}
        return JSONResponse(body, status_code=500)
