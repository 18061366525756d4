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
    assert set(tokens) == floors and result["floor"]["enabled"]
    # At 400 tokens everything fits: a floor can only leave memories out.
    assert tokens["tiermem, drop-off 0.35"]["400"] <= tokens["tiermem, no floor"]["400"]
    assert result["mean_tokens"]["400"] <= tokens["tiermem, no floor"]["400"]
    assert "LoCoMo evidence recall" in proc.stdout and "Relevance floor" in proc.stdout


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
