"""Smoke test of benchmarks/locomo_cv.py on two tiny conversations in LoCoMo's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark, write_conversation

pytestmark = pytest.mark.slow  # loads the embedding model


def test_locomo_cv_chooses_each_lever_on_the_other_conversations(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    tiny = (data / "tiny.json").read_text()
    (data / "tiny2.json").write_text(tiny.replace("Ada", "Eve").replace("Pixel", "Rex"))
    args = [str(data), "--budgets", "60", "400", "--levers", "weights.keyword", "follow_up"]
    args += ["--cache", str(tmp_path / "cache")]
    proc, result = run_benchmark("locomo_cv", *args, out=tmp_path / "cv.json")
    assert result["questions"] == 6 and set(result["levers"]) == {"weights.keyword", "follow_up"}
    keyword = result["levers"]["weights.keyword"]
    assert set(keyword["fold_choices"]) == {"tiny", "tiny2"}
    for part in ("default", "in_sample", "cv"):
        assert set(keyword[part]["recall"]) == {"60", "400"}
    assert keyword["default"]["recall"]["400"] == 1.0  # the whole history fits
    assert "ingested into" in proc.stdout
    # a second run reuses the cached store
    proc, _ = run_benchmark("locomo_cv", *args, out=tmp_path / "cv.json")
    assert "ingested into" not in proc.stdout and "leave-one-conversation-out" in proc.stdout


def test_locomo_cv_needs_two_conversations(tmp_path: Path) -> None:
    import subprocess
    import sys

    from benchsmoke import ROOT

    write_conversation(tmp_path)
    proc = subprocess.run(
        [sys.executable, "benchmarks/locomo_cv.py", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "two conversations" in proc.stderr
