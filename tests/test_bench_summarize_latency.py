"""Smoke test: benchmarks/summarize_latency.py --quick runs and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_summarize_latency_quick(tmp_path: Path) -> None:
    out = tmp_path / "summarize_latency.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "benchmarks/summarize_latency.py", "--quick", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "reproduce: python benchmarks/summarize_latency.py --quick" in run.stdout
    rows = json.loads(out.read_text())["rows"]
    sync = rows["LLM summarizer, sync mode"]
    background = rows["LLM summarizer, background (default)"]
    assert sync["max_us"] >= 100_000  # the sync append that completed a batch waited 100 ms
    assert background["p99_us"] < 100_000  # appends did not wait on the LLM
