"""Smoke test of benchmarks/ingest.py on a tiny conversation in LoCoMo's format: every
figure is measured for both engines, against both floors."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark, write_conversation

pytestmark = pytest.mark.slow  # loads the embedding model and starts a PostgreSQL


def test_ingest_quick_run_times_every_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIERMEM_TEST_PG_URL", raising=False)  # it drops tables: its own server
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    args = ("--adds", "20", "--conversations", "1", "--samples", "2")
    proc, result = run_benchmark("ingest", str(data), *args, out=tmp_path / "i.json", timeout=600)
    rows = result["add_latency"]
    assert {(r["engine"], r["durability"]) for r in rows} == {
        (engine, durability)
        for engine in ("sqlite", "postgresql")
        for durability in ("committed", "synced", "async_commit", "memory", "committed, add-only")
    }
    costs = {(r["engine"], r["durability"]): r["x_baseline"] for r in result["durability_cost"]}
    assert costs.keys() == {(r["engine"], r["durability"]) for r in rows}
    assert costs["postgresql", "async_commit"] == {"p50": 1.0, "p99": 1.0}
    for row in rows:
        for key in ("add_us", "floor_us", "same_table_floor_us"):
            assert 0 < row[key]["p50"] <= row[key]["p99"]
    ingest = result["ingest"]
    assert ingest["messages"] == 6 and ingest["ratio"] > 0
    assert 0 < result["findable"]["keyword_ms"]["p50"] <= result["findable"]["vector_ms"]["p95"]
    assert result["findable"]["keyword_ms_without_pending_vectors"]["p50"] > 0
    assert "ratio" in proc.stdout and "same-table floor" in proc.stdout
    assert "What each durability costs" in proc.stdout
