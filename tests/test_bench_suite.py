"""Smoke test: benchmarks/suite.py runs two revisions' tests alternating and compares them."""

from __future__ import annotations

from pathlib import Path

from benchsmoke import run_benchmark


def test_suite_benchmark_on_a_few_tests(tmp_path: Path) -> None:
    args = ("--base", "HEAD", "--head", "HEAD", "--rounds", "2", "--tests", "tests/test_tokens.py")
    proc, result = run_benchmark("suite", *args, out=tmp_path / "suite.json")
    assert [r["order"] for r in result["rounds"]] == [["base", "head"], ["head", "base"]]
    for r in result["rounds"]:
        assert r["tests"][0] == r["tests"][1] == r["common"] > 0  # the same tests both sides
        assert r["ratio"] is not None and r["ratio"] > 0
    assert "fast suite, HEAD (base) against HEAD (head)" in proc.stdout
