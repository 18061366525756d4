"""Runs a benchmark the way a user does, for the tests/test_bench_*.py smoke tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(
    name: str, *args: str, out: Path, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run ``python benchmarks/<name>.py <args> --out <out>`` from the checkout, offline.

    Asserts it exits 0 and prints the line that reproduces it; returns the finished
    process and the JSON it wrote.
    """
    proc = benchmark_process(name, *args, "--out", str(out), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"reproduce: python benchmarks/{name}.py {' '.join(args)}" in proc.stdout
    return proc, json.loads(out.read_text())


def benchmark_process(name: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/<name>.py <args>`` run to its end from the checkout, offline."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, f"benchmarks/{name}.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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
    """A two-session conversation in LoCoMo's format, with questions, as ``tiny.json``."""
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
