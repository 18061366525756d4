"""Smoke test: benchmarks/embeddings.py --quick runs every provider and writes its JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark


@pytest.mark.slow
def test_embeddings_benchmark_quick(tmp_path: Path) -> None:
    _, result = run_benchmark("embeddings", "--quick", "--texts", "16", out=tmp_path / "e.json")
    providers = result["providers"]
    assert set(providers) == {"raw ST", "local", "openai (HTTP)", "local, cached repeat"}
    for row in providers.values():
        assert row["sentences_per_s"] > 0 and row["min_cosine_vs_raw"] > 0.9999
