"""Smoke test: benchmarks/summarize_latency.py --quick runs and writes its JSON."""

from __future__ import annotations

from pathlib import Path

from benchsmoke import run_benchmark


def test_summarize_latency_quick(tmp_path: Path) -> None:
    _, result = run_benchmark("summarize_latency", "--quick", out=tmp_path / "s.json", timeout=120)
    rows = result["rows"]
    sync = rows["LLM summarizer, sync mode"]
    background = rows["LLM summarizer, background (default)"]
    assert sync["max_us"] >= 100_000  # the sync append that completed a batch waited 100 ms
    assert background["p99_us"] < 100_000  # appends did not wait on the LLM
