"""Smoke test of benchmarks/locomo.py on a tiny conversation in LoCoMo's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark, write_conversation

pytestmark = pytest.mark.slow  # loads the embedding model


def test_locomo_quick_run_reports_every_method(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    proc, result = run_benchmark(
        "locomo", str(data), "--quick", "--budgets", "120", "400", out=tmp_path / "locomo.json"
    )
    assert result["questions"] == 3
    recall = result["recall"]
    floors = {
        "tiermem, no floor",
        "tiermem, absolute only",
        "tiermem, drop-off 0.25",
        "tiermem, drop-off 0.35",
    }
    assert set(recall) == {"tiermem", "buffer-only", "bm25-only", "dense-only", *floors}
    assert recall["tiermem, no floor"]["400"] == 1.0  # the whole history fits in 400 tokens
    assert all(v <= b for b, v in result["mean_tokens"].items() for b in [float(b)])
    tokens = result["variant_tokens"]
    assert set(tokens) == floors and not result["floor"]["enabled"]  # off by default
    # At 400 tokens everything fits: a floor can only leave memories out.
    assert tokens["tiermem, drop-off 0.35"]["400"] <= tokens["tiermem, no floor"]["400"]
    assert result["mean_tokens"]["400"] <= tokens["tiermem, no floor"]["400"]
    assert "LoCoMo evidence recall" in proc.stdout and "Relevance floor" in proc.stdout


def test_locomo_auc_only_measures_the_search_score_alone(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    proc, result = run_benchmark("locomo", str(data), "--auc-only", out=tmp_path / "auc.json")
    assert set(result) == {"embedder", "conversations", "ingest_s", "scores"}
    assert result["scores"]["questions"] == 3 and 0.5 < result["scores"]["auc"] <= 1
    assert "search score ROC AUC" in proc.stdout and "LoCoMo evidence recall" not in proc.stdout


def test_roc_auc_counts_ties_as_a_half() -> None:
    import sys

    import numpy as np

    from benchsmoke import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from locomo import roc_auc

    assert roc_auc(np.array([0.9, 0.8]), np.array([0.1, 0.2, 0.3])) == 1.0
    assert roc_auc(np.array([0.1]), np.array([0.9])) == 0.0
    assert roc_auc(np.array([0.5]), np.array([0.5, 0.1])) == 0.75


def test_locomo_refuses_a_folder_without_conversations(tmp_path: Path) -> None:
    import subprocess
    import sys

    from benchsmoke import ROOT

    proc = subprocess.run(
        [sys.executable, "benchmarks/locomo.py", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "no LoCoMo conversations" in proc.stderr


def test_locomo_history_axis_asks_each_conversation_of_a_longer_history(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    tiny = (data / "tiny.json").read_text()
    (data / "tiny2.json").write_text(tiny.replace("Ada", "Eve").replace("Pixel", "Rex"))
    proc, result = run_benchmark(
        "locomo",
        str(data),
        "--budgets",
        "120",
        "400",
        "--floors",
        "--history",
        "1",
        "2",
        out=tmp_path / "locomo.json",
    )
    axis = result["history"]
    assert axis["levels"] == [1, 2] and axis["messages"] == {"1": 6, "2": 12}
    assert set(axis["recall"]) == {"1", "2"} and axis["recall"]["2"]["400"] == 1.0
    assert set(axis["category_recall"]["1"]) == {"multi-hop", "single-hop"}
    assert all(v["p50"] > 0 for v in axis["ratio_to_embedding"].values())
    assert "History size" in proc.stdout and "x2 vs x1" in proc.stdout
    scores = result["scores"]  # issue 35, item 4: the search score's separation
    assert scores["questions"] == 6 and scores["evidence_turns"] == 8
    assert scores["evidence_turns"] + scores["other_turns"] == 3 * 6 * 2
    assert 0.5 < scores["auc"] <= 1 and scores["recommended"] == 0.2
    kept = scores["thresholds"]["0.2"]
    assert 0 <= kept["evidence_kept"] <= 1 and 0 <= kept["others_left_out"] <= 1
    assert "ROC AUC" in proc.stdout and "the min_score the docs recommend" in proc.stdout
