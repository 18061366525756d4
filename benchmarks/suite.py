"""The test suite's own time, before and after a change: is the suite slower?

Runs the fast suite (``pytest -m "not slow"``) of two revisions of this repository,
alternating (A B, then B A, ...), each in a git worktree of its own with its own ``src``
first on the path, and compares the tests the two have in common by their JUnit
durations, so tests a change added do not count against it. Prints, per round and in
all, the wall time, the tests, the common tests' summed time and the ratio, and the
test files whose time grew the most.

    python benchmarks/suite.py --base 93ff90d --head main --rounds 2

``--tests PATH ...`` runs only those test files or folders on both sides (the smoke test
runs one file).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import reproduce_command, rich_table, write_json

ROOT = Path(__file__).resolve().parents[1]


def worktree(rev: str, path: Path) -> Path:
    """A detached worktree of ``rev`` at ``path`` (removed by :func:`drop`)."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(path), rev],
        check=True,
    )
    return path


def drop(path: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False
    )


def run_suite(tree: Path, junit: Path, tests: Sequence[str]) -> float:
    """Run the fast suite in ``tree``; its wall seconds (JUnit written to ``junit``)."""
    args = [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider"]
    args += [f"--junitxml={junit}", *tests]
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    started = time.monotonic()
    subprocess.run(args, cwd=tree, env=env, stdout=subprocess.DEVNULL, check=False)
    return time.monotonic() - started


def durations(junit: Path) -> dict[tuple[str, str], float]:
    """Each test's (module, name) and its seconds, from a JUnit file."""
    return {
        (case.get("classname") or "", case.get("name") or ""): float(case.get("time") or 0)
        for case in ET.parse(junit).getroot().iter("testcase")
    }


def compare(
    base: dict[tuple[str, str], float], head: dict[tuple[str, str], float]
) -> dict[str, Any]:
    """The common tests' summed seconds on each side, and per module what grew most."""
    common = set(base) & set(head)
    modules: dict[str, list[float]] = {}
    for key in common:
        pair = modules.setdefault(key[0], [0.0, 0.0])
        pair[0] += base[key]
        pair[1] += head[key]
    grew = sorted(modules.items(), key=lambda kv: kv[1][0] - kv[1][1])[:5]
    base_s, head_s = sum(base[k] for k in common), sum(head[k] for k in common)
    return {
        "tests": [len(base), len(head)],
        "common": len(common),
        "common_seconds": [round(base_s, 1), round(head_s, 1)],
        "ratio": round(head_s / base_s, 3) if base_s else None,
        "grew_most": {m: [round(a, 1), round(b, 1)] for m, (a, b) in grew},
    }


def load() -> float:
    return os.getloadavg()[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision before the change")
    parser.add_argument("--head", default="HEAD", help="the revision after it")
    parser.add_argument("--rounds", type=int, default=1, help="pairs of runs, alternating")
    parser.add_argument("--tests", nargs="*", default=[], help="test paths (default: all)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/suite.json"))
    args = parser.parse_args(argv)

    rounds = []
    with tempfile.TemporaryDirectory(prefix="tiermem-suite-") as tmp:
        trees = {side: worktree(getattr(args, side), Path(tmp) / side) for side in ("base", "head")}
        try:
            for n in range(args.rounds):
                order = ("base", "head") if n % 2 == 0 else ("head", "base")
                walls, times, loads = {}, {}, {}
                for side in order:
                    junit = Path(tmp) / f"{side}-{n}.xml"
                    loads[side] = load()
                    walls[side] = run_suite(trees[side], junit, args.tests)
                    times[side] = durations(junit)
                figures = compare(times["base"], times["head"])
                figures.update(
                    order=list(order),
                    wall=[round(walls["base"], 1), round(walls["head"], 1)],
                    load=[round(loads["base"], 1), round(loads["head"], 1)],
                )
                rounds.append(figures)
        finally:
            for tree in trees.values():
                drop(tree)

    table = rich_table(
        f"fast suite, {args.base} (base) against {args.head} (head)",
        ["round", "load at start", "wall s", "tests", "common", "common s", "head / base"],
    )
    for n, r in enumerate(rounds):
        table.add_row(
            f"{n + 1} ({' then '.join(r['order'])})",
            "{} / {}".format(*r["load"]),
            "{} / {}".format(*r["wall"]),
            "{} / {}".format(*r["tests"]),
            str(r["common"]),
            "{} / {}".format(*r["common_seconds"]),
            str(r["ratio"]),
        )
    from rich.console import Console

    console = Console()
    console.print(table)
    for n, r in enumerate(rounds):
        grew = ", ".join(f"{m} {a} -> {b}" for m, (a, b) in r["grew_most"].items())
        console.print(f"round {n + 1}, grew most: {grew}")
    print(f"reproduce: {reproduce_command(__file__, argv)}")
    write_json(args.out, {"base": args.base, "head": args.head, "rounds": rounds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
