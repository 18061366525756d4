"""``tiermem worker``: a process that only runs the store's claimed work, with a health
check and Prometheus metrics on a port (:class:`~tiermem.work.process.WorkerProcess`).

SIGTERM (or Ctrl-C) stops it cleanly: the round in hand ends (up to ``--grace`` seconds),
the rows it still holds are given back at once, and it exits 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from tiermem.extras import needs_extra

if TYPE_CHECKING:
    from tiermem.work.process import WorkerProcess


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tiermem worker``."""
    parser.add_argument("--config", help="YAML configuration (the store, the models)")
    parser.add_argument("--db", help="SQLite file of the embedded store")
    parser.add_argument("--host", default="127.0.0.1", help="address of the health endpoint")
    parser.add_argument("--port", type=int, help="serve /health and /metrics on this port")
    parser.add_argument(
        "--grace", type=float, default=10.0, help="seconds a stop waits for the round in hand"
    )
    parser.add_argument(
        "--idle", type=float, default=0.5, help="seconds between looks while there is no work"
    )


def health_server(process: WorkerProcess, host: str, port: int) -> ThreadingHTTPServer:
    """/health (JSON, 503 when unhealthy) and /metrics (the server's Prometheus gauges of
    :meth:`WorkerProcess.figures`), served on a thread."""
    with needs_extra("server", "tiermem worker --port", "the worker's /metrics"):
        from prometheus_client import CONTENT_TYPE_LATEST

        from tiermem.server.metrics import Metrics

    metrics = Metrics(process.figures)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._answer(200, metrics.render(), CONTENT_TYPE_LATEST)
            elif self.path == "/health":
                ok, body = process.health()
                self._answer(200 if ok else 503, json.dumps(body).encode(), "application/json")
            else:
                self._answer(404, b'{"detail": "not found"}', "application/json")

        def _answer(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every few seconds: not worth a line each

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="tiermem-health", daemon=True).start()
    return server


def run_worker(process: WorkerProcess, host: str, port: int | None, grace: float) -> int:
    """Work until SIGTERM or SIGINT, then stop cleanly; the exit code (0)."""
    from tiermem.cli.commands import make_console

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    http = None if port is None else health_server(process, host, port)
    process.start()
    console = make_console()
    where = "" if port is None else f"; /health and /metrics on http://{host}:{port}"
    console.print(f"worker {process.owner} started{where}", highlight=False)
    while not stop.wait(0.5) and process.alive():
        pass
    if http is not None:
        http.shutdown()
    given_back = process.stop(grace)
    console.print(f"worker {process.owner} stopped; {given_back} claimed rows given back")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from tiermem.cli.commands import check_db
    from tiermem.memory import Memory
    from tiermem.work.process import WorkerProcess

    if args.port is not None:  # the extra is checked before the model loads
        with needs_extra("server", "tiermem worker --port", "the worker's /metrics"):
            import prometheus_client  # noqa: F401
    memory = Memory(check_db(args.db), config=args.config)
    return run_worker(WorkerProcess(memory, idle=args.idle), args.host, args.port, args.grace)
