"""Runs a benchmark the way a user does, for the tests/test_bench_*.py smoke tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(
    name: str, *args: str, out: Path, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run ``python benchmarks/<name>.py <args> --out <out>`` from the checkout, offline.

    Asserts it exits 0 and prints the line that reproduces it; returns the finished
    process and the JSON it wrote.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    command = [f"benchmarks/{name}.py", *args, "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"reproduce: python benchmarks/{name}.py {' '.join(args)}" in proc.stdout
    return proc, json.loads(out.read_text())
