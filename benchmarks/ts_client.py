"""The TypeScript client beside the Python one: ``getContext`` round trips from Node
(clients/typescript's ``MemoryClient``) and ``get_context`` from Python's
``MemoryClient``, against the same ``tiermem serve`` in one run, and the package's load
time in Node.

One server (the embedded default: SQLite file, local MiniLM) holds a user with 200
messages and four facts (``benchmarks/server.py``'s seed). Both clients ask the same
queries, one call at a time over a keep-alive connection, after a warm-up; the calls
alternate between the two in ``--rounds`` parts, so a machine whose load changes during
the run weighs on both alike. Printed: p50 and p95 of each and the ratio Node / Python
(goal: p50 <= 1.1). Load time: a fresh ``node`` imports the built package (``dist/``)
``--loads`` times, timed inside the process from before the import to after it (goal:
median < 50 ms); the command that measures one load is printed.

    python benchmarks/ts_client.py [--calls 200] [--rounds 4] [--loads 10] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import nearest_rank, reproduce_command, rich_table, write_json
from server import QUERIES, seed, served

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "typescript" / "scripts"))
from built import ensure_built

ROOT = Path(__file__).resolve().parents[1]
USER = "ts-bench"
GOAL_RATIO = 1.1
GOAL_LOAD_MS = 50.0

# A Node process that answers "N" on stdin with the milliseconds of N getContext calls
# (one JSON line), so the rounds of both clients can alternate without a process start.
NODE_TIMER = """
import { createInterface } from "node:readline";
import { MemoryClient } from "%(entry)s";
const memory = new MemoryClient(process.env.TIERMEM_URL);
const queries = JSON.parse(process.env.QUERIES);
let i = 0;
for await (const line of createInterface({ input: process.stdin })) {
  const times = [];
  for (let n = 0; n < Number(line); n++) {
    const start = performance.now();
    await memory.getContext(queries[i++ %% queries.length], "%(user)s", "history", 1000);
    times.push(performance.now() - start);
  }
  console.log(JSON.stringify(times));
}
"""
LOAD = (
    "const t = performance.now(); await import(%s); console.log((performance.now() - t).toFixed(2))"
)


def figures(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "calls": len(ordered),
        "p50_ms": round(nearest_rank(ordered, 0.5), 3),
        "p95_ms": round(nearest_rank(ordered, 0.95), 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


def round_trips(url: str, entry: Path, calls: int, rounds: int) -> dict[str, dict[str, float]]:
    """``calls`` context calls from each client, alternating in ``rounds`` parts."""
    from tiermem.client import MemoryClient

    env = {**os.environ, "TIERMEM_URL": url, "QUERIES": json.dumps(QUERIES)}
    script = NODE_TIMER % {"entry": entry.as_uri(), "user": USER}
    node = subprocess.Popen(
        ["node", "--input-type=module", "-e", script],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert node.stdin is not None and node.stdout is not None

    def node_calls(n: int) -> list[float]:
        node.stdin.write(f"{n}\n")  # type: ignore[union-attr]
        node.stdin.flush()  # type: ignore[union-attr]
        return [float(t) for t in json.loads(node.stdout.readline())]  # type: ignore[union-attr]

    times: dict[str, list[float]] = {"node": [], "python": []}
    with MemoryClient(url) as client:

        def python_calls(n: int) -> list[float]:
            spent = []
            for i in range(n):
                start = time.perf_counter()
                client.get_context(QUERIES[i % len(QUERIES)], USER, "history", 1000)
                spent.append((time.perf_counter() - start) * 1000)
            return spent

        node_calls(20), python_calls(20)  # warm-up: connections, caches, JIT
        parts = [calls // rounds + (1 if r < calls % rounds else 0) for r in range(rounds)]
        for r, n in enumerate(parts):
            sides = (("node", node_calls), ("python", python_calls))
            for side, run in sides if r % 2 == 0 else reversed(sides):
                times[side] += run(n)
    node.stdin.close()
    node.wait(30)
    return {side: figures(spent) for side, spent in times.items()}


def load_times(entry: Path, loads: int) -> tuple[dict[str, float], str]:
    """Milliseconds a fresh node takes to import the package, and the command."""
    command = ["node", "--input-type=module", "-e", LOAD % json.dumps(entry.as_uri())]
    spent = [
        float(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        for _ in range(loads)
    ]
    relative = json.dumps("./clients/typescript/dist/index.js")
    shown = shlex.join(["node", "--input-type=module", "-e", LOAD % relative])
    return {
        "loads": loads,
        "median_ms": round(statistics.median(spent), 2),
        "min_ms": round(min(spent), 2),
    }, shown


def _served_round_trips(
    folder: Path, env: dict[str, str], entry: Path, calls: int, rounds: int
) -> dict[str, dict[str, float]]:
    """A server on a file in ``folder``, seeded, and both clients' round trips to it."""
    from tiermem.client import MemoryClient

    with served(["--db", str(folder / "memory.db")], env) as url:
        with MemoryClient(url) as client:
            seed(client, USER)
        return round_trips(url, entry, calls, rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="context calls per client")
    parser.add_argument("--rounds", type=int, default=4, help="alternating parts")
    parser.add_argument("--loads", type=int, default=10, help="fresh node processes timed")
    parser.add_argument("--quick", action="store_true", help="20 calls, 3 loads")
    parser.add_argument("--out", default="benchmarks/results/ts_client.json")
    args = parser.parse_args(argv)
    calls, loads = (20, 3) if args.quick else (args.calls, args.loads)
    entry = ensure_built()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="tiermem-ts-bench-") as folder:
        trips = _served_round_trips(Path(folder), env, entry, calls, args.rounds)
    load, command = load_times(entry, loads)
    ratio = trips["node"]["p50_ms"] / trips["python"]["p50_ms"]
    report: dict[str, Any] = {
        "context": trips,
        "ratio_p50": round(ratio, 3),
        "load": load,
        "load_command": command,
        "node": subprocess.run(
            ["node", "--version"], capture_output=True, text=True
        ).stdout.strip(),
    }
    print_report(report)
    print(f"reproduce: {reproduce_command(__file__, argv)}")
    write_json(args.out, report)
    return 0


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console

    table = rich_table(
        "getContext round trip, one server", ["client", "calls", "p50 ms", "p95 ms", "mean ms"]
    )
    for side, label in (
        ("node", f"Node {report['node']} (TypeScript)"),
        ("python", "Python MemoryClient"),
    ):
        row = report["context"][side]
        table.add_row(
            label,
            str(row["calls"]),
            f"{row['p50_ms']:.2f}",
            f"{row['p95_ms']:.2f}",
            f"{row['mean_ms']:.2f}",
        )
    Console().print(table)
    print(f"getContext p50, Node / Python: {report['ratio_p50']:.2f}x (goal <= {GOAL_RATIO}x)")
    load = report["load"]
    print(
        f"package load in Node: median {load['median_ms']:.1f} ms, min {load['min_ms']:.1f} ms "
        f"over {load['loads']} processes (goal < {GOAL_LOAD_MS:.0f} ms)"
    )
    print(f"one load: {report['load_command']}")


if __name__ == "__main__":
    raise SystemExit(main())
