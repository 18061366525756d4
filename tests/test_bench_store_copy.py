"""Smoke test: benchmarks/store_copy.py --quick copies into SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark


@pytest.mark.slow
def test_store_copy_benchmark_quick(tmp_path: Path) -> None:
    proc, result = run_benchmark("store_copy", "--quick", out=tmp_path / "c.json")
    runs = result["runs"]
    assert set(runs) == {"sqlite -> sqlite", "sqlite -> postgresql"}
    for run in runs.values():
        assert run["rows"] == 4 * 100 * 2
        assert 0 < run["verify_seconds"] < run["seconds"] and run["rows_per_second"] > 0
    assert "rows/s (copy)" in proc.stdout
