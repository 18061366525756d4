"""Smoke test: benchmarks/summary_quality.py --quick runs and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TIERMEM_LOCOMO", "/work/shared/data/locomo"))


@pytest.mark.skipif(not DATA.is_dir(), reason="LoCoMo data folder not present")
def test_summary_quality_quick(tmp_path: Path) -> None:
    out = tmp_path / "summary_quality.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "benchmarks/summary_quality.py", str(DATA), "--quick", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "reproduce: python benchmarks/summary_quality.py" in run.stdout
    result = json.loads(out.read_text())
    methods = result["methods"]
    assert set(methods) == {"extractive (tiermem)", "lead-k", "random sentences", "full session"}
    assert result["sessions"] == 3
    full = methods["full session"]["evidence_kept"]
    assert full == 1.0
    assert methods["extractive (tiermem)"]["evidence_kept"] <= full
