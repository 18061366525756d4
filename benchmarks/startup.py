"""Cold start and install size: the default (ONNX) install beside the PyTorch one.

Each figure is a fresh process, as a user or a script meets it, on a user with 1,000
memories (SQLite, built once, a fresh copy per run):

- api: ``import tiermem`` + ``Memory()`` + the first ``get_context`` (timed inside the
  process, from before the import to the context; the process's wall time is beside it);
- cli add / search / context: ``tiermem <command>`` on that user, wall time;
- refused: ``tiermem context --max-tokens -5`` (arguments are checked before anything
  heavy loads).

Embedders: ``local/all-MiniLM-L6-v2`` (the default, onnxruntime) and
``torch/all-MiniLM-L6-v2`` (sentence-transformers); rounds interleave them so machine
load hits both alike; min and median of ``--runs`` runs. Goal: api <= 1.5 s and every
figure <= 0.2x of the torch one. ``--sizes`` also builds two virtualenvs in a temporary
folder (``pip install <checkout>``; ``pip install torch==2.13.0`` then
``<checkout>[torch]``) and prints their size beside an empty one's (pip and setuptools;
goal: default <= 350 MB).

    python benchmarks/startup.py [--runs 5] [--memories 1000] [--sizes] [--quick] [--out FILE]
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
import time
from pathlib import Path
from typing import Any

from _common import reproduce_command, rich_table, write_json

ROOT = Path(__file__).resolve().parents[1]
USER = "bench"
QUESTION = "Which dish did I like in city 5?"
EMBEDDERS = {"default": "local/all-MiniLM-L6-v2", "torch": "torch/all-MiniLM-L6-v2"}
API = """
import json, sys, time
start = time.perf_counter()
from tiermem import Memory
imported = time.perf_counter()
memory = Memory(sys.argv[1], embedder=sys.argv[2])
built = time.perf_counter()
context = memory.get_context(sys.argv[3], "bench", "s2", max_tokens=1000)
done = time.perf_counter()
memory.close()
assert context.items, "no context"
print(json.dumps({"import": imported - start, "memory": built - imported,
                  "context": done - built, "total": done - start}))
"""


def env() -> dict[str, str]:
    """The checkout's tiermem, offline (no hub probe for the torch path either)."""
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}


def build_db(folder: Path, memories: int) -> Path:
    """A SQLite store with ``memories`` archived messages of one user."""
    from tiermem import Memory

    path = folder / "base.db"
    memory = Memory(str(path))
    memory.add_messages(
        [
            {
                "role": "user",
                "content": f"Note {i}: in city {i % 97} I liked dish {i % 31} with friend {i % 13}.",
            }
            for i in range(memories)
        ],
        user_id=USER,
        session_id="s1",
    )
    memory.flush()
    count = memory.store.index.count(USER)
    memory.close()
    if count < memories:
        raise SystemExit(f"the store holds {count} memories of {USER}, expected {memories}")
    return path


def fresh_copy(base: Path, folder: Path) -> Path:
    """A copy of the store (and its WAL files) no earlier run has touched."""
    target = folder / f"run-{time.monotonic_ns()}.db"
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{base}{suffix}")
        if source.exists():
            shutil.copyfile(source, f"{target}{suffix}")
    return target


def config_file(folder: Path, model: str) -> Path:
    path = folder / f"{model.replace('/', '_')}.yaml"
    path.write_text(f'llm:\n  models:\n    - embedding: "{model}"\n')
    return path


def timed(command: list[str], expect_ok: bool = True) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(command, env=env(), capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    if (proc.returncode == 0) != expect_ok:
        raise SystemExit(f"{command} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return wall, proc.stdout


def one_round(base: Path, folder: Path, model: str) -> dict[str, float]:
    """Every figure once for ``model``, each in a fresh process on a fresh store copy."""
    out: dict[str, float] = {}
    wall, stdout = timed(
        [sys.executable, "-c", API, str(fresh_copy(base, folder)), model, QUESTION]
    )
    out["api"] = json.loads(stdout.strip().splitlines()[-1])["total"]
    out["api, process wall"] = wall
    cli = [sys.executable, "-m", "tiermem.cli"]
    config = str(config_file(folder, model))
    commands = {
        "cli add": ["add", "I also liked the soup.", "--session", "s2"],
        "cli search": ["search", QUESTION],
        "cli context": ["context", QUESTION, "--session", "s2", "--max-tokens", "1000"],
    }
    for name, args in commands.items():
        db = str(fresh_copy(base, folder))
        out[name] = timed([*cli, *args, "--user", USER, "--db", db, "--config", config])[0]
    refused = ["context", QUESTION, "--max-tokens", "-5", "--user", USER, "--config", config]
    out["cli refused (--max-tokens -5)"] = timed([*cli, *refused], expect_ok=False)[0]
    return out


def venv_size(folder: Path, name: str, installs: list[list[str]]) -> dict[str, Any]:
    """Create a virtualenv, run each pip install in it, return its size on disk."""
    target = folder / name
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    python = str(target / "bin" / "python")
    for args in installs:
        pip = subprocess.run(
            [python, "-m", "pip", "install", "-q", *args], capture_output=True, text=True
        )
        if pip.returncode != 0:
            raise SystemExit(f"pip install {' '.join(args)} failed: {pip.stderr[-2000:]}")
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file() and not f.is_symlink())
    probe = "import importlib.util as u; print(u.find_spec('torch') is not None)"
    has_torch = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    return {"mb": size / 1e6, "torch": has_torch.stdout.strip() == "True"}


def sizes(folder: Path) -> dict[str, Any]:
    """The empty virtualenv (pip and setuptools), the default install and ``[torch]``
    (named "torch extra": rich would read ``[torch]`` as markup)."""
    return {
        "empty": venv_size(folder, "empty", []),
        "default": venv_size(folder, "default", [[str(ROOT)]]),
        "torch extra": venv_size(folder, "torch", [["torch==2.13.0"], [f"{ROOT}[torch]"]]),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="one run on 50 memories")
    parser.add_argument("--sizes", action="store_true", help="also measure both virtualenvs")
    parser.add_argument("--out", default="benchmarks/results/startup.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.memories = 1, 50
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = Path(tempfile.mkdtemp(prefix="tiermem-startup-"))
    try:
        base = build_db(folder, args.memories)
        samples: dict[str, dict[str, list[float]]] = {name: {} for name in EMBEDDERS}
        for _ in range(args.runs):
            for name, model in EMBEDDERS.items():
                for figure, seconds in one_round(base, folder, model).items():
                    samples[name].setdefault(figure, []).append(seconds)
        results: dict[str, Any] = {
            "memories": args.memories,
            "runs": args.runs,
            "figures": {
                name: {
                    figure: {"min": min(values), "median": statistics.median(values)}
                    for figure, values in per.items()
                }
                for name, per in samples.items()
            },
            "command": reproduce_command(__file__, argv),
        }
        if args.sizes:
            results["venv_mb"] = sizes(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report(results)
    write_json(args.out, results)
    return results


def report(results: dict[str, Any]) -> None:
    from rich.console import Console

    default, torch = results["figures"]["default"], results["figures"]["torch"]
    table = rich_table(
        f"Fresh process on a user with {results['memories']:,} memories "
        f"(seconds, {results['runs']} runs)",
        ("figure", "default min", "default median", "torch min", "torch median", "ratio (median)"),
    )
    for figure, row in default.items():
        other = torch[figure]
        table.add_row(
            figure,
            f"{row['min']:.2f}",
            f"{row['median']:.2f}",
            f"{other['min']:.2f}",
            f"{other['median']:.2f}",
            f"{row['median'] / other['median']:.2f}x",
        )
    console = Console(width=120)
    console.print(table)
    if "venv_mb" in results:
        venvs = results["venv_mb"]
        for name, venv in venvs.items():
            added = venv["mb"] - venvs["empty"]["mb"]
            console.print(
                f"virtualenv {name}: {venv['mb']:,.1f} MB, {added:,.1f} MB more than an empty "
                f"one (torch installed: {venv['torch']})"
            )
        ratio = venvs["default"]["mb"] / venvs["torch extra"]["mb"]
        console.print(f"default / torch extra: {ratio:.2f}x")
    console.print(f"reproduce: {results['command']}")


if __name__ == "__main__":
    main()
