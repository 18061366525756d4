"""Prometheus metrics of one server process: requests, latency, pending work, store size.

Each app has its own registry (several apps in one process do not mix their counts).
With ``--workers N`` every worker counts its own requests; scrape each worker, or sum.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Figures(Collector):
    """Gauges read at scrape time from ``figures()`` (name -> value, None when unknown)."""

    def __init__(self, figures: Callable[[], dict[str, float | None]]) -> None:
        self.figures = figures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, value in self.figures().items():
            if value is not None:
                yield GaugeMetricFamily(f"tiermem_{name}", name.replace("_", " "), value=value)


class Metrics:
    """The registry, and the request counter and latency histogram, by route template."""

    def __init__(self, figures: Callable[[], dict[str, float | None]]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "tiermem_http_requests",
            "HTTP requests by method, route and status",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "tiermem_http_request_duration_seconds",
            "HTTP request latency by method and route",
            ("method", "route"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Figures(figures))
        self.in_progress = 0
        """HTTP requests being answered now."""
        self.registry.register(
            _Figures(lambda: {"http_requests_in_progress": float(self.in_progress)})
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def alone(self) -> bool:
        """Whether the request being answered is the only one: nothing else waits for the
        event loop. Requests read in the same pass of the loop (queued, not yet started)
        are let in first, so they count."""
        await asyncio.sleep(0)
        return self.in_progress <= 1

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """ASGI middleware counting and timing every HTTP request."""

        async def timed(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            start = time.perf_counter()
            status = 500
            self.in_progress += 1

            async def record_status(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            try:
                await app(scope, receive, record_status)
            finally:
                self.in_progress -= 1
                route: Any = scope.get("route")
                path = getattr(route, "path", None) or "unmatched"
                method = str(scope["method"])
                self.requests.labels(method, path, str(status)).inc()
                self.latency.labels(method, path).observe(time.perf_counter() - start)

        return timed
