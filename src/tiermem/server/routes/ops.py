"""Operations: health, readiness, metrics, the inspector page and the API reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from tiermem.errors import NotFoundError
from tiermem.server import models
from tiermem.server.metrics import Metrics
from tiermem.server.service import Service


def router(service: Service, metrics: Metrics) -> APIRouter:
    """The operations routes."""
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


UI_DIR = Path(__file__).parent.parent / "ui"


def _check(probe: Callable[[], Any]) -> str:
    try:
        probe()
    except Exception as exc:  # readiness reports any failure; it never raises
        return f"{type(exc).__name__}: {exc}"[:300]
    return "ok"
