"""Smoke test of benchmarks/server.py: a tiny run on the embedded default."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchsmoke import run_benchmark


@pytest.mark.slow  # a server process and an in-process Memory, each with MiniLM
def test_server_benchmark_runs_and_loses_nothing(tmp_path: Path) -> None:
    proc, report = run_benchmark("server", "--quick", out=tmp_path / "server.json", timeout=600)
    runs = report["backends"]["embedded"]
    for clients in (1, 8, 32):
        sent = runs["server"][f"messages@{clients}"]
        assert sent["acknowledged"] == sent["stored"] == 16
        for where in ("server", "in_process"):
            row = runs[where][f"context@{clients}"]
            assert row["requests"] == 6 and row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
    assert "context p50, 1 client: server / in process" in proc.stdout
    assert "messages lost or duplicated at levels: none" in proc.stdout


@pytest.mark.slow  # PostgreSQL and two server processes, each with MiniLM
def test_server_benchmark_compares_the_native_async_store(tmp_path: Path) -> None:
    proc, report = run_benchmark(
        "server",
        "--backends",
        "postgres",
        "--async-only",
        "--async-contexts",
        "16",
        "--rounds",
        "2",
        out=tmp_path / "server.json",
        timeout=600,
    )
    sides = report["async_store"]["postgres"]
    assert sides["native"]["requests"] == sides["threads"]["requests"] == 16
    assert sides["driver"]["threads_per_second"] > 0 and sides["driver"]["async_per_second"] > 0
    assert "native async / thread hop" in proc.stdout and "reproduce:" in proc.stdout
