"""Smoke test: benchmarks/working.py --quick runs, checks exactness and writes its JSON."""

from __future__ import annotations

from pathlib import Path

from benchsmoke import run_benchmark


def test_working_benchmark_quick(tmp_path: Path) -> None:
    proc, results = run_benchmark("working", "--quick", "--queries", "20", out=tmp_path / "w.json")
    assert "WorkingMemory search" in proc.stdout
    assert [scale["total"] for scale in results["scales"]] == [2000, 10000]
    for scale in results["scales"]:
        assert set(scale["users"]) == {"small", "big"}
        assert scale["users"]["small"]["tiermem_p95_ms"] > 0
    assert results["fifo"]["evicted_during_adds"] > 0
