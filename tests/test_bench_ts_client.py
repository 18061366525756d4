"""Smoke test of benchmarks/ts_client.py: a tiny run, Node and Python against one server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchsmoke import run_benchmark


@pytest.mark.slow  # a server process with MiniLM, a Node process
@pytest.mark.skipif(
    not (shutil.which("node") and shutil.which("npm")), reason="node and npm are not installed"
)
def test_ts_client_benchmark_times_both_clients_and_the_load(tmp_path: Path) -> None:
    proc, report = run_benchmark("ts_client", "--quick", out=tmp_path / "ts.json", timeout=600)
    for side in ("node", "python"):
        row = report["context"][side]
        assert row["calls"] == 20 and 0 < row["p50_ms"] <= row["p95_ms"]
    assert report["ratio_p50"] > 0 and 0 < report["load"]["min_ms"] <= report["load"]["median_ms"]
    assert "getContext p50, Node / Python:" in proc.stdout
    assert "one load: node --input-type=module -e" in proc.stdout
