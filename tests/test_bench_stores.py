"""Smoke test: benchmarks/stores.py --quick runs both engines and writes its JSON."""

from __future__ import annotations

from pathlib import Path

from benchsmoke import run_benchmark


def test_stores_benchmark_quick(tmp_path: Path) -> None:
    _, payload = run_benchmark("stores", "--quick", out=tmp_path / "stores.json")
    engines = [r["engine"] for r in payload["results"]]
    assert any(e.startswith("SQLite") for e in engines) and any("PostgreSQL" in e for e in engines)
    for result in payload["results"]:
        for user in ("small", "big"):
            assert result[user]["p95_ms"] > 0.0 and 0.0 <= result[user]["recall"] <= 1.0
    tiermem = [r for r in payload["results"] if "tiermem" in r["engine"]]
    assert all(r[user]["recall"] >= 0.95 for r in tiermem for user in ("small", "big"))
