"""Smoke test of benchmarks/locomo_qa.py against the local OpenAI-protocol server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from benchsmoke import run_benchmark, write_conversation
from fakeserver import FakeServer

pytestmark = pytest.mark.slow  # loads the embedding model

GOLD = {"dog": "Pixel", "sister": "Porto", "class": "pottery"}  # asked about -> answer


def reply(body: dict[str, Any]) -> str:
    """Answers with a gold answer the memories hold; judges by whether the gold answer is
    in the generated one."""
    prompt = str(body["messages"][-1]["content"])
    judged = re.search(r"Gold answer: (.*)\nGenerated answer: (.*)\n", prompt)
    if judged:
        ok = judged.group(1).lower() in judged.group(2).lower()
        return f'Same topic. {{"label": "{"CORRECT" if ok else "WRONG"}"}}'
    memories, question = prompt.split("Question:")
    gold = next(g for word, g in GOLD.items() if word in question)
    return gold if gold in memories else "I do not know"


def test_locomo_qa_answers_and_judges_through_an_openai_protocol_server(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    with FakeServer(chat_reply=reply) as server:
        proc, result = run_benchmark(
            "locomo_qa",
            str(data),
            "--llm",
            server.openai_url,
            "--model",
            "fake",
            "--budget",
            "400",
            "--workers",
            "2",
            out=tmp_path / "qa.json",
        )
        calls = len(server.requests)
    systems = result["systems"]
    assert set(systems) == {"tiermem", "full-context"} and result["questions"] == 3
    assert calls == 2 * 3 * 2  # an answer and a judgement per question and system
    full = systems["full-context"]
    assert full["by_category"] == {"multi-hop": 1.0, "single-hop": 1.0}
    assert full["answers"][0]["answer"] == "Pixel" and full["answers"][0]["correct"]
    assert 0 <= systems["tiermem"]["accuracy"] <= 1
    assert systems["tiermem"]["mean_tokens"] <= 400
    assert "LoCoMo answer accuracy" in proc.stdout


def test_judge_label_parsing() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from locomo_qa import parse_label

    assert parse_label('Fine. {"label": "CORRECT"}')
    assert not parse_label('{"label": "WRONG"}')
    assert parse_label("It matches: CORRECT")
    assert not parse_label("no label")
