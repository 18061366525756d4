"""Smoke test: benchmarks/startup.py --quick times every figure for both embedders."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark


@pytest.mark.slow
def test_startup_benchmark_quick(tmp_path: Path) -> None:
    proc, result = run_benchmark("startup", "--quick", out=tmp_path / "s.json", timeout=900)
    figures = result["figures"]
    assert set(figures) == {"default", "torch"}
    expected = {
        "api",
        "api, process wall",
        "cli add",
        "cli search",
        "cli context",
        "cli refused (--max-tokens -5)",
    }
    for per in figures.values():
        assert set(per) == expected
        assert all(0 < row["min"] <= row["median"] for row in per.values())
    assert "ratio (median)" in proc.stdout
