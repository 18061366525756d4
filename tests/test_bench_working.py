"""Smoke test: benchmarks/working.py --quick runs, checks exactness and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_working_benchmark_quick(tmp_path: Path) -> None:
    out = tmp_path / "working.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/working.py"),
            "--quick",
            "--queries",
            "20",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert "reproduce:" in run.stdout and "WorkingMemory search" in run.stdout
    results = json.loads(out.read_text())
    assert [scale["total"] for scale in results["scales"]] == [2000, 10000]
    for scale in results["scales"]:
        assert set(scale["users"]) == {"small", "big"}
        assert scale["users"]["small"]["tiermem_p95_ms"] > 0
    assert results["fifo"]["evicted_during_adds"] > 0
