"""WorkingMemory search latency, memory per item and FIFO cleanup cost.

For each total size (10k and 100k items; --quick: 2k and 10k) the index holds a user
owning 1k items, a user owning up to 50k (at most half the total), and many small
users. Search latency (k=5) for the 1k-item and the big user is measured beside two
alternatives in the same run on the same vectors:

- numpy brute force: one global matrix, a boolean mask of the user's rows, matmul + top-k;
- faiss global: one IndexIDMap(IndexFlatIP) for everyone, restricted per query with
  IDSelectorBatch (the other design the issue names).

Every tiermem result is checked against numpy's exact top-k. Goal: p95 <= 1 ms for the
1k-item user at 100k items.

    python benchmarks/working.py [--quick] [--queries N] [--out benchmarks/results/working.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import faiss
import numpy as np
from rich.console import Console

from _common import nearest_rank, reproduce_command, rich_table, write_json
from tiermem.working.memory import WorkingMemory

DIM = 384
K = 5


def percentiles(samples_s: list[float]) -> tuple[float, float]:
    """(p50, p95) in milliseconds."""
    ms = sorted(s * 1000 for s in samples_s)
    return statistics.median(ms), nearest_rank(ms, 0.95)


def timed(fn: Callable[[np.ndarray], Any], queries: np.ndarray) -> list[float]:
    out = []
    for q in queries:
        start = time.perf_counter()
        fn(q)
        out.append(time.perf_counter() - start)
    return out


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def owners(total: int) -> tuple[list[str], dict[str, int]]:
    """User of each item: 'small' owns 1k, 'big' up to 50k, others 100 each (interleaved)."""
    sizes = {"small": 1000, "big": min(50_000, total // 2)}
    rest = total - sum(sizes.values())
    sizes.update({f"u{i}": 100 for i in range(rest // 100)})
    users = [user for user, n in sizes.items() for _ in range(n)]
    users += ["u0"] * (total - len(users))
    rng = np.random.default_rng(1)
    return [users[i] for i in rng.permutation(len(users))], sizes


def bench_scale(total: int, n_queries: int) -> dict[str, Any]:
    faiss.omp_set_num_threads(1)  # as WorkingMemory does, so faiss_global compares designs
    rng = np.random.default_rng(total)
    vectors = unit_rows(rng, total)
    users, sizes = owners(total)
    wm = WorkingMemory(dimension=DIM, max_memory_mb=100_000, fifo_interval_min=None)
    tracemalloc.start()
    rss0 = rss_bytes()
    start = time.perf_counter()
    for i in range(total):
        wm.add_with_embedding(f"item {i} of user {users[i]}", vectors[i], user_id=users[i])
    insert_s = time.perf_counter() - start
    python_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    rss_per_item = (rss_bytes() - rss0) / total
    ids = np.arange(1, total + 1, dtype=np.int64)  # WorkingMemory assigns ids 1..n in order
    user_arr = np.asarray(users)
    glob = faiss.IndexIDMap(faiss.IndexFlatIP(DIM))
    glob.add_with_ids(vectors, ids)
    queries = unit_rows(rng, n_queries)
    result: dict[str, Any] = {
        "total": total,
        "insert_items_per_s": total / insert_s,
        "python_bytes_per_item": python_bytes / total,
        "rss_bytes_per_item": rss_per_item,
        "accounted_bytes_per_item": wm.size_mb * 1024 * 1024 / total,
        "users": {},
    }
    for user in ("small", "big"):
        mask = user_arr == user
        user_ids = ids[mask]

        def numpy_topk(q: np.ndarray, mask: np.ndarray = mask) -> np.ndarray:
            scores = vectors[mask] @ q
            top = np.argpartition(-scores, K)[:K]
            return ids[mask][top[np.argsort(-scores[top])]]

        def faiss_global(q: np.ndarray, user_ids: np.ndarray = user_ids) -> Any:
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(user_ids))
            return glob.search(q.reshape(1, -1), K, params=params)

        def tiermem(q: np.ndarray, user: str = user) -> Any:
            return wm.search(q, k=K, user_id=user)

        for q in queries[:20]:  # exactness against numpy
            got = [item.id for item in tiermem(q)]
            assert got == numpy_topk(q).tolist(), (user, got)
            assert all(users[i - 1] == user for i in got)
        tiermem(queries[0])  # warm up
        row = {"items": int(sizes[user])}
        for name, fn in (
            ("tiermem", tiermem),
            ("numpy", numpy_topk),
            ("faiss_global", faiss_global),
        ):
            p50, p95 = percentiles(timed(fn, queries))
            row[f"{name}_p50_ms"], row[f"{name}_p95_ms"] = p50, p95
        result["users"][user] = row
    wm.close()
    return result


def bench_fifo(n_adds: int) -> dict[str, Any]:
    """Add latency below and at the size limit (each add at the limit evicts the oldest)."""
    rng = np.random.default_rng(7)
    vectors = unit_rows(rng, 2 * n_adds)
    wm = WorkingMemory(dimension=DIM, max_memory_mb=10, fifo_interval_min=None)
    per_item = (DIM * 4 + 400) / (1024 * 1024)
    capacity = int(10 / per_item)
    fill = unit_rows(rng, capacity)
    for i in range(capacity):
        wm.add_with_embedding(f"filler {i}", fill[i], user_id=f"u{i % 50}")
    below = WorkingMemory(dimension=DIM, max_memory_mb=1000, fifo_interval_min=None)

    def adder(memory: WorkingMemory, offset: int) -> Callable[[np.ndarray], Any]:
        counter = iter(range(offset, offset + 10 * n_adds))
        return lambda v: memory.add_with_embedding(
            f"new item {next(counter)}", v, user_id=f"u{next(counter) % 50}"
        )

    p50_below, p95_below = percentiles(timed(adder(below, 0), vectors[:n_adds]))
    evicted_before = wm.stats().evicted
    p50_full, p95_full = percentiles(timed(adder(wm, 0), vectors[n_adds:]))
    items_before = len(wm)
    wm.max_memory_mb = 5
    start = time.perf_counter()
    evicted_half = wm.cleanup()
    half_s = time.perf_counter() - start
    for memory in (wm, below):
        memory.close()
    return {
        "items_at_10mb": items_before,
        "add_below_limit_p50_ms": p50_below,
        "add_below_limit_p95_ms": p95_below,
        "add_at_limit_p50_ms": p50_full,
        "add_at_limit_p95_ms": p95_full,
        "evicted_during_adds": wm.stats().evicted - evicted_before - evicted_half,
        "cleanup_half_items": evicted_half,
        "cleanup_half_ms": half_s * 1000,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--queries", type=int, default=None, help="queries per measurement")
    parser.add_argument("--out", default="benchmarks/results/working.json")
    args = parser.parse_args(argv)
    scales = [2_000, 10_000] if args.quick else [10_000, 100_000]
    n_queries = args.queries or (50 if args.quick else 500)
    results = {
        "scales": [bench_scale(total, n_queries) for total in scales],
        "fifo": bench_fifo(200 if args.quick else 2000),
        "faiss_version": faiss.__version__,
        "command": reproduce_command(__file__, argv),
    }
    report(results)
    write_json(args.out, results)
    return results


def report(results: dict[str, Any]) -> None:
    console = Console()
    table = rich_table(
        f"WorkingMemory search, k={K}, {DIM} dims (ms)",
        (
            "total",
            "user items",
            "tiermem p50",
            "tiermem p95",
            "numpy p95",
            "faiss global p95",
            "numpy/tiermem",
            "faiss global/tiermem",
        ),
        left=0,
    )
    for scale in results["scales"]:
        for row in scale["users"].values():
            table.add_row(
                f"{scale['total']:,}",
                f"{row['items']:,}",
                f"{row['tiermem_p50_ms']:.3f}",
                f"{row['tiermem_p95_ms']:.3f}",
                f"{row['numpy_p95_ms']:.3f}",
                f"{row['faiss_global_p95_ms']:.3f}",
                f"{row['numpy_p95_ms'] / row['tiermem_p95_ms']:.1f}x",
                f"{row['faiss_global_p95_ms'] / row['tiermem_p95_ms']:.1f}x",
            )
    console.print(table)
    memory = rich_table(
        "Memory per item (bytes) and insert rate",
        ("total", "accounted", "python heap", "RSS delta", "adds/s"),
        left=0,
    )
    for scale in results["scales"]:
        memory.add_row(
            f"{scale['total']:,}",
            f"{scale['accounted_bytes_per_item']:.0f}",
            f"{scale['python_bytes_per_item']:.0f}",
            f"{scale['rss_bytes_per_item']:.0f}",
            f"{scale['insert_items_per_s']:,.0f}",
        )
    console.print(memory)
    fifo = results["fifo"]
    fifo_table = rich_table("FIFO cleanup (max_memory_mb=10)", ("measure", "value"))
    for key, value in fifo.items():
        fifo_table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(fifo_table)
    console.print(f"reproduce: {results['command']}")


if __name__ == "__main__":
    main()
