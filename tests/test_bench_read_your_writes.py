"""Smoke test: benchmarks/read_your_writes.py --quick prints both figures beside their
comparisons."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark


@pytest.mark.slow
def test_read_your_writes_benchmark_quick(tmp_path: Path) -> None:
    proc, result = run_benchmark("read_your_writes", "--quick", out=tmp_path / "r.json")
    assert result["pairs"] == 40
    assert result["misses"]["pending embedded with the query"] == 0
    assert result["misses"]["keyword only"] > 0  # the comparison: paraphrases need meaning
    latency = result["latency_ms"]
    assert latency["none pending (8 indexed)"]["ratio_p50"] == 1.0
    assert all(row["p50"] > 0 for row in latency.values())
    assert "misses" in proc.stdout and "ratio" in proc.stdout
