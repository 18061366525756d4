"""Smoke test: benchmarks/summary_quality.py --quick runs and writes its JSON."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchsmoke import run_benchmark

DATA = Path(os.environ.get("TIERMEM_LOCOMO", "/work/shared/data/locomo"))


@pytest.mark.skipif(not DATA.is_dir(), reason="LoCoMo data folder not present")
def test_summary_quality_quick(tmp_path: Path) -> None:
    _, result = run_benchmark(
        "summary_quality", str(DATA), "--quick", out=tmp_path / "q.json", timeout=120
    )
    methods = result["methods"]
    assert set(methods) == {"extractive (tiermem)", "lead-k", "random sentences", "full session"}
    assert result["sessions"] == 3
    full = methods["full session"]["evidence_kept"]
    assert full == 1.0
    assert methods["extractive (tiermem)"]["evidence_kept"] <= full
