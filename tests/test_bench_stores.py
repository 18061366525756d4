"""Smoke test: benchmarks/stores.py --quick runs both engines and writes its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_stores_benchmark_quick(tmp_path: Path) -> None:
    out = tmp_path / "stores.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "stores.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "reproduce: python benchmarks/stores.py --quick" in proc.stdout
    payload = json.loads(out.read_text())
    engines = [r["engine"] for r in payload["results"]]
    assert any(e.startswith("SQLite") for e in engines) and any("PostgreSQL" in e for e in engines)
    for result in payload["results"]:
        for user in ("small", "big"):
            assert result[user]["p95_ms"] > 0.0 and 0.0 <= result[user]["recall"] <= 1.0
    tiermem = [r for r in payload["results"] if "tiermem" in r["engine"]]
    assert all(r[user]["recall"] >= 0.95 for r in tiermem for user in ("small", "big"))
