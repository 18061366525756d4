"""Smoke test: benchmarks/summary_quality.py --quick runs and writes its JSON."""

from __future__ import annotations

from pathlib import Path

from benchsmoke import run_benchmark, write_conversation


def test_summary_quality_quick(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    _, result = run_benchmark(
        "summary_quality", str(data), "--quick", out=tmp_path / "q.json", timeout=120
    )
    methods = result["methods"]
    assert set(methods) == {"extractive (tiermem)", "lead-k", "random sentences", "full session"}
    assert result["sessions"] == 2
    full = methods["full session"]["evidence_kept"]
    assert full == 1.0
    assert methods["extractive (tiermem)"]["evidence_kept"] <= full
