"""Smoke test: benchmarks/embeddings.py --quick runs every provider and writes its JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark


@pytest.mark.slow
def test_embeddings_benchmark_quick(tmp_path: Path) -> None:
    _, result = run_benchmark("embeddings", "--quick", "--texts", "16", out=tmp_path / "e.json")
    providers = result["providers"]
    assert set(providers) == {"raw ST", "local", "torch", "openai (HTTP)", "local, cached repeat"}
    for name, row in providers.items():
        exact = name in ("raw ST", "torch", "openai (HTTP)")  # the same fp32 model
        assert row["sentences_per_s"] > 0
        assert row["min_cosine_vs_raw"] > (0.9999 if exact else 0.99)
    quality = result["default_vs_sentence_transformers"]
    assert 0.99 < quality["cosine_min"] <= quality["cosine_mean"] < 1.0 + 1e-6
    assert 0.5 < quality["top10_overlap"] <= 1.0
