"""Smoke test of benchmarks/scale.py at tiny sizes on SQLite: two stores (the second grown
from a copy of the first), every figure of the curve measured, growth factors printed."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from benchsmoke import benchmark_process, run_benchmark, write_conversation

pytestmark = pytest.mark.slow  # loads the embedding model in three processes


def test_scale_quick_run_prints_the_curve(tmp_path: Path) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    args = ("--sizes", "40", "120", "--small", "10", "--big", "30", "--engines", "sqlite")
    args += ("--adds", "4", "--writers", "2", "--queries", "2")
    args += ("--fixtures", str(tmp_path / "fx"))
    proc, result = run_benchmark("scale", str(data), *args, out=tmp_path / "s.json", timeout=600)
    small, grown = result["rows"]
    assert (small["size"], grown["size"]) == (40, 120)
    assert grown["grown_from"] == small["name"] and grown["messages"] >= 120
    for row in result["rows"]:
        assert 0 < row["add_ms"]["p50"] <= row["add_ms"]["p99"]
        assert 0 < row["add_spread_ms"]["p50"] <= row["add_spread_ms"]["p99"]
        assert row["writers"]["add_ms"] == min(2, row["writers"]["add_spread_ms"])
        assert 0 < row["context_big_ms"]["p50"] <= row["context_big_ms"]["p95"]
        assert row["recall_small"] == row["recall_big"] == 1.0  # exact search on SQLite
        assert row["autovacuum"] == {"contexts": 0, "seen": []}  # none on SQLite
        assert row["frozen_objects"] > 10_000  # the startup heap, as tiermem serve's
        assert row["context_big_quiet_ms"] == row["context_big_ms"]
        assert len(row["context_big_samples_ms"]) == 2  # one a question
        assert max(row["context_big_samples_ms"]) == pytest.approx(
            row["context_big_ms"]["p95"], abs=0.01
        )
        assert row["bytes_per_message"] > row["text_bytes_per_message"] > 0
        assert row["worker_rows_per_s"] > 0 and row["rss_mb"]["VmRSS"] > 0
    assert set(result["growth"]["sqlite 40->120"]) >= {"add p99 ms", "get_context big p95 ms"}
    assert "Growth factors" in proc.stdout and "big/small get_context p95" in proc.stdout


def test_scale_build_only_measures_nothing(tmp_path: Path) -> None:
    """``--build-only`` builds the fixtures and leaves an earlier run's results alone."""
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    out = tmp_path / "s.json"
    out.write_text("{}")
    args = ("--sizes", "40", "--small", "10", "--big", "30", "--engines", "sqlite")
    args += ("--build-only", "--fixtures", str(tmp_path / "fx"), "--out", str(out))
    proc = benchmark_process("scale", str(data), *args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sqlite-40-10-30: 40 messages of 2 users" in proc.stdout
    assert (tmp_path / "fx" / "sqlite-40-10-30.db").exists()
    assert "cost curve" not in proc.stdout and out.read_text() == "{}"


def test_scale_partitioned_postgresql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--partitions N``: the PostgreSQL stores made hash-partitioned by user, in fixtures
    of their own, and measured as the others."""
    import psycopg

    from conformance.conftest import _server_url

    url = _server_url()
    data = tmp_path / "locomo"
    data.mkdir()
    write_conversation(data)
    args = ("--sizes", "40", "--small", "10", "--big", "30", "--engines", "postgresql")
    args += ("--adds", "4", "--queries", "2", "--fixtures", str(tmp_path / "fx"))
    args += ("--partitions", "4")
    monkeypatch.setenv("TIERMEM_TEST_PG_URL", url)  # the benchmark's server
    _, result = run_benchmark("scale", str(data), *args, out=tmp_path / "s.json", timeout=600)
    (row,) = result["rows"]
    assert row["engine"] == "postgresql_p4" and row["name"].startswith("postgresql_p4-")
    assert row["partitions"] == 4  # the layout the store was found with
    assert set(row["server"]) == {"shared_buffers", "effective_cache_size", "max_wal_size"}
    assert 0 < row["context_big_ms"]["p50"] <= row["context_big_ms"]["p95"]
    watched = row["autovacuum"]  # asked before each of the 2 x 2 contexts
    assert 0 <= watched["contexts"] <= 4
    assert all(q.startswith("autovacuum:") for q in watched["seen"])
    if watched["contexts"] < 2:  # a context of each user with autovacuum idle
        assert row["context_big_quiet_ms"]["p95"] > 0
    database = urlunsplit(urlsplit(url)._replace(path="/" + row["name"].replace("-", "_")))
    with psycopg.connect(database) as conn:
        parts = conn.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'memories_384'::regclass"
        ).fetchone()
    assert parts is not None and parts[0] == 4
