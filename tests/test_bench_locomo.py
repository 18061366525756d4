"""Smoke test of benchmarks/locomo.py on a tiny conversation in LoCoMo's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchsmoke import run_benchmark

pytestmark = pytest.mark.slow  # loads the embedding model

TURNS = [
    ("Ada", "Hi Bo! I finally adopted a greyhound, her name is Pixel."),
    ("Bo", "Congratulations! How old is she?"),
    ("Ada", "Three years old. She loves long walks by the river."),
    ("Bo", "My sister Cleo just moved to Porto for a job in design."),
]
LATER = [
    ("Ada", "I signed up for a pottery class that starts next week."),
    ("Bo", "Nice. Cleo says Porto is rainy but beautiful."),
]


def write_conversation(folder: Path) -> None:
    data = {
        "speaker_a": "Ada",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in enumerate(TURNS, 1)
        ],
        "session_2_date_time": "10:00 am on 2 June, 2023",
        "session_2": [
            {"speaker": s, "dia_id": f"D2:{i}", "text": t} for i, (s, t) in enumerate(LATER, 1)
        ],
        "qa": [
            {
                "question": "What is the name of Ada's dog?",
                "answer": "Pixel",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where does Bo's sister live?",
                "answer": "Porto",
                "evidence": ["D1:4", "D2:2"],
                "category": 1,
            },
            {
                "question": "What class did Ada sign up for?",
                "answer": "pottery",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {
                "question": "What is Bo's favourite colour?",
                "answer": "n/a",
                "evidence": [],
                "category": 5,
            },
        ],
    }
    (folder / "tiny.json").write_text(json.dumps(data))


def test_locomo_quick_run_reports_every_method(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    proc, result = run_benchmark(
        "locomo", str(data), "--quick", "--budgets", "120", "400", out=tmp_path / "locomo.json"
    )
    assert result["questions"] == 3
    recall = result["recall"]
    assert set(recall) == {"tiermem", "buffer-only", "bm25-only", "dense-only"}
    assert recall["tiermem"]["400"] == 1.0  # the whole history fits in 400 tokens
    assert all(v <= b for b, v in result["mean_tokens"].items() for b in [float(b)])
    assert "LoCoMo evidence recall" in proc.stdout


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
