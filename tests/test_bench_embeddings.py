"""Smoke test: benchmarks/embeddings.py --quick runs every provider and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.slow
def test_embeddings_benchmark_quick(tmp_path: Path) -> None:
    out = tmp_path / "embeddings.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/embeddings.py"),
            "--quick",
            "--texts",
            "16",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert "reproduce:" in run.stdout
    providers = json.loads(out.read_text())["providers"]
    assert set(providers) == {"raw ST", "local", "openai (HTTP)", "local, cached repeat"}
    for row in providers.values():
        assert row["sentences_per_s"] > 0 and row["min_cosine_vs_raw"] > 0.9999
