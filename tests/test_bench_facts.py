"""Smoke test of benchmarks/facts.py on a tiny conversation in LoCoMo's format, offline
and with --llm fake (the local OpenAI-protocol server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark, write_conversation

pytestmark = pytest.mark.slow  # loads the embedding model


@pytest.mark.parametrize("llm", [[], ["--llm", "fake"]])
def test_facts_quick_run_reports_facts_answers_and_recall(tmp_path: Path, llm: list[str]) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    proc, result = run_benchmark(
        "facts", str(data), "--quick", "--budgets", "120", "400", *llm, out=tmp_path / "f.json"
    )
    assert result["sessions"] == 2 and result["messages"] == 6
    # "I finally adopted a greyhound, her name is Pixel.", "My sister Cleo just moved to
    # Porto for a job in design.", "I signed up for a pottery class that starts next week."
    assert result["facts"] == 3
    assert result["answers_in_facts"] == 1.0
    recall = result["recall"]
    assert set(recall) == {
        "without facts: text",
        "without facts: text or fact",
        "with facts: text",
        "with facts: text or fact",
    }
    assert recall["with facts: text or fact"]["400"] == 1.0
    assert "LoCoMo evidence recall without and with facts" in proc.stdout
    if llm:
        assert result["llm"]["calls"] == 2  # one per session
        assert result["llm"]["calls_per_100_messages"] == pytest.approx(100 * 2 / 6)
