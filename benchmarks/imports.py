"""What an import costs: ``import tiermem.client`` beside ``import httpx``, and the
planner's import chain.

Each figure is a fresh process (as a script meets it) that imports one module and
reports how many modules the import added to ``sys.modules`` and how long it took, with
every module's bytecode cached as an installed package has it (a warm-up round writes it
to a temporary ``PYTHONPYCACHEPREFIX``: the checkout's sources are not compiled on every
import, nor httpx's cached otherwise); rounds alternate the two imports so machine load
hits both alike; median and min of ``--runs`` runs. The client needs only httpx, the contract and the wire format (goal: at
most 1.5x the modules and 1.5x the time of ``import httpx``; ``import tiermem.client``
includes httpx's own). The planner's chain: the tiermem modules ``import tiermem.planner``
loads, any provider (``llm``, ``embeddings``, ``rerank``), store or configuration module
among them flagged (goal: none).

    python benchmarks/imports.py [--runs 10] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import positive, reproduce_command, rich_table, write_json

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("httpx", "tiermem.client")
GOAL = 1.5
FORBIDDEN = ("tiermem.llm", "tiermem.embeddings", "tiermem.rerank", "tiermem.stores")
"""Packages the planner's chain must not reach (providers and stores), and below, the
configuration modules."""
CONFIG = ("tiermem.config", "tiermem.config.model", "tiermem.config.source")
HEAVY = (
    "numpy",
    "pydantic",
    "yaml",
    "tiermem.planner",
    "tiermem.config",
    "tiermem.stores",
)
"""What the client's import must not load."""
PROBE = """
import importlib, json, sys, time
before = set(sys.modules)
start = time.perf_counter()
importlib.import_module(sys.argv[1])
seconds = time.perf_counter() - start
added = sorted(set(sys.modules) - before)
print(json.dumps({"seconds": seconds, "modules": len(added), "added": added}))
"""


def probe(module: str, cache: Path) -> dict[str, Any]:
    """Import ``module`` in a fresh process of the checkout, its bytecode cached under
    ``cache``: its time, the modules it added."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONPYCACHEPREFIX": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, module], env=env, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        raise SystemExit(f"import {module} failed: {proc.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def flagged(module: str) -> bool:
    """Whether ``module`` is a provider, store or configuration module of tiermem."""
    return module in CONFIG or any(module == p or module.startswith(p + ".") for p in FORBIDDEN)


def measure(runs: int, cache: Path) -> dict[str, Any]:
    for target in (*TARGETS, "tiermem.planner"):  # the warm-up: bytecode written
        probe(target, cache)
    samples: dict[str, list[dict[str, Any]]] = {t: [] for t in TARGETS}
    for _ in range(runs):
        for target in TARGETS:
            samples[target].append(probe(target, cache))
    figures = {
        target: {
            "seconds": statistics.median(s["seconds"] for s in runs_of),
            "seconds_min": min(s["seconds"] for s in runs_of),
            "modules": statistics.median(s["modules"] for s in runs_of),
        }
        for target, runs_of in samples.items()
    }
    client = samples["tiermem.client"][-1]["added"]
    planner = [m for m in probe("tiermem.planner", cache)["added"] if m.split(".")[0] == "tiermem"]
    return {
        "figures": figures,
        "ratio": {
            "modules": figures["tiermem.client"]["modules"] / figures["httpx"]["modules"],
            "seconds": figures["tiermem.client"]["seconds"] / figures["httpx"]["seconds"],
        },
        "client_tiermem": [m for m in client if m.split(".")[0] == "tiermem"],
        "client_heavy": [m for m in HEAVY if m in client],
        "planner_chain": planner,
        "planner_flagged": [m for m in planner if flagged(m)],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive, default=10)
    parser.add_argument("--quick", action="store_true", help="two runs")
    parser.add_argument("--out", default="benchmarks/results/imports.json")
    args = parser.parse_args(argv)
    runs = 2 if args.quick else args.runs
    cache = Path(tempfile.mkdtemp(prefix="tiermem-imports-"))
    try:
        figures = measure(runs, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    results = {"runs": runs, **figures, "command": reproduce_command(__file__, argv)}
    report(results)
    write_json(args.out, results)
    return results


def report(results: dict[str, Any]) -> None:
    from rich.console import Console

    figures, ratio = results["figures"], results["ratio"]
    table = rich_table(
        f"A fresh process's import ({results['runs']} runs)",
        ("import", "modules (median)", "ms (median)", "ms (min)"),
    )
    for target, row in figures.items():
        table.add_row(
            target,
            f"{row['modules']:g}",
            f"{row['seconds'] * 1000:.0f}",
            f"{row['seconds_min'] * 1000:.0f}",
        )
    table.add_row(
        "tiermem.client / httpx",
        f"{ratio['modules']:.2f}x",
        f"{ratio['seconds']:.2f}x",
        "",
    )
    console = Console(width=120)
    console.print(table)
    met = ratio["modules"] <= GOAL and ratio["seconds"] <= GOAL
    console.print(f"goal: at most {GOAL}x the modules and the time of httpx: {_yes(met)}")
    console.print(f"tiermem modules the client loads: {', '.join(results['client_tiermem'])}")
    console.print(
        f"numpy, pydantic, yaml, planner, config, stores loaded by the client: "
        f"{', '.join(results['client_heavy']) or 'none'}"
    )
    chain = results["planner_chain"]
    console.print(f"import tiermem.planner loads {len(chain)} tiermem modules: {', '.join(chain)}")
    bad = results["planner_flagged"]
    console.print(f"provider, store or config modules among them: {', '.join(bad) or 'none'}")
    console.print(f"reproduce: {results['command']}")


def _yes(met: bool) -> str:
    return "met" if met else "NOT met"


if __name__ == "__main__":
    main()
