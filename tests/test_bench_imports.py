"""Smoke test: benchmarks/imports.py --quick measures both imports and the planner's chain."""

from __future__ import annotations

from pathlib import Path

from benchsmoke import run_benchmark


def test_imports_benchmark_quick(tmp_path: Path) -> None:
    proc, results = run_benchmark("imports", "--quick", out=tmp_path / "i.json")
    figures = results["figures"]
    assert set(figures) == {"httpx", "tiermem.client"}
    for row in figures.values():
        assert row["modules"] > 0 and 0 < row["seconds_min"] <= row["seconds"]
    assert figures["tiermem.client"]["modules"] > figures["httpx"]["modules"]  # httpx's too
    assert results["ratio"]["modules"] > 1
    assert "tiermem.client" in results["client_tiermem"]
    assert results["client_heavy"] == []
    assert "tiermem.planner" in results["planner_chain"]
    assert results["planner_flagged"] == []
    assert "tiermem.client / httpx" in proc.stdout
    assert "provider, store or config modules among them: none" in proc.stdout
