"""Smoke test of benchmarks/workers.py on SQLite: a server under load, one then two
`tiermem worker` processes, every message indexed and every worker stopped cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark, write_conversation

pytestmark = pytest.mark.slow  # a server and three workers load the embedding model


def test_workers_quick_run_measures_throughput_and_lag(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    args = ("--messages", "12", "--workers", "1", "2", "--engine", "sqlite", "--clients", "2")
    proc, result = run_benchmark("workers", str(data), *args, out=tmp_path / "w.json", timeout=600)
    one, two = result["rows"]
    assert (one["workers"], two["workers"]) == (1, 2)
    for row in result["rows"]:
        assert row["ingest_per_s"] > 0 and row["post_ms"]["p50"] <= row["post_ms"]["p99"]
        assert sum(row["indexed_by_worker"]) == 12  # each message indexed once
        assert row["worker_exit_codes"] == [0] * row["workers"]
        assert 0 <= row["lag_s"]["p50"] <= row["lag_s"]["max"]
    assert "x 1 worker" in proc.stdout
