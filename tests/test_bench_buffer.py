"""Smoke tests of benchmarks/buffer.py (tiermem only, no network) and its peer harness."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from benchsmoke import run_benchmark

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
TIERMEM_KEYS = ("tiermem-conversation", "tiermem-count", "tiermem-tokens")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def peers() -> ModuleType:
    return _load("peers")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "buffer.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_quick_tiermem_only_prints_table_and_writes_json(tmp_path: Path) -> None:
    proc, report = run_benchmark("buffer", "--quick", "--peers", "none", out=tmp_path / "b.json")
    assert "µs per append" in proc.stdout
    assert set(report["results"]) == {*TIERMEM_KEYS, "tiermem-memory-add"}
    added = report["results"]["tiermem-memory-add"]
    assert 0 < added["best"] <= added["median"] and added["adds"] == 600
    assert "tiermem Memory.add, embedded default" in proc.stdout
    cfg = report["config"]
    for key in TIERMEM_KEYS:
        res = report["results"][key]
        assert "error" not in res, res
        for n in cfg["sizes"]:
            assert 0 < res["append"][str(n)]["best"] <= res["append"][str(n)]["median"]
        for h in cfg["histories"]:
            last50 = res["reads"][str(h)]["last50"]
            assert last50["messages"] == 50 and last50["newest_ok"]
            assert res["reads"][str(h)]["context"]["newest_ok"]
        assert res["serialization"]["restored"] == cfg["serial_n"]
        assert res["memory"]["peak_bytes"] > 0
        assert report["summary"][key]["problems"] == []
    # The count windows hand the LLM exactly their 50 messages.
    assert report["results"]["tiermem-count"]["reads"]["1000"]["context"]["messages"] == 50


def test_unknown_peer_is_a_usage_error(tmp_path: Path) -> None:
    proc = _run("--quick", "--peers", "nosuchpeer", "--out", str(tmp_path / "x.json"))
    assert proc.returncode == 2
    assert "nosuchpeer" in proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_run_python_round_trips_args_and_ignores_other_output(peers: ModuleType) -> None:
    code = "print('noise'); emit({'n': ARGS['n'] + 1, 's': ARGS['s']}); print('after')"
    assert peers.run_python(sys.executable, code, {"n": 41, "s": "é"}) == {"n": 42, "s": "é"}


@pytest.mark.parametrize(
    ("code", "message"),
    [("raise SystemExit('boom')", "boom"), ("print('no result')", "emitted no result")],
)
def test_run_python_reports_failures(peers: ModuleType, code: str, message: str) -> None:
    with pytest.raises(peers.PeerError, match=message):
        peers.run_python(sys.executable, code)


def test_run_python_times_out(peers: ModuleType) -> None:
    with pytest.raises(peers.PeerError, match="timed out"):
        peers.run_python(sys.executable, "import time; time.sleep(10)", timeout=0.5)


def test_peer_that_cannot_install_is_unavailable_and_leaves_no_cache(
    peers: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_BENCH_VENVS", str(tmp_path))
    broken = peers.Peer("broken", ("nothing==0",), python=str(tmp_path / "no-python"))
    monkeypatch.setitem(peers.PEERS, "broken", broken)
    with pytest.raises(peers.PeerUnavailable, match="cannot run"):
        peers.ensure_peer("broken")
    with pytest.raises(peers.PeerUnavailable):
        peers.run_in_peer("broken", "emit(1)")
    assert list(tmp_path.iterdir()) == []


def test_failed_import_check_leaves_no_cache(
    peers: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No requirement to install (pip with no packages is an error), so use the probe:
    # a venv is created, pip installs pip itself (already there, offline), the probe fails.
    monkeypatch.setenv("TIERMEM_BENCH_VENVS", str(tmp_path))
    peer = peers.Peer("probe", ("pip",), probe="import module_that_does_not_exist")
    monkeypatch.setitem(peers.PEERS, "probe", peer)
    with pytest.raises(peers.PeerUnavailable, match="import check"):
        peers.ensure_peer("probe")
    assert list(tmp_path.iterdir()) == []


def test_cache_key_depends_on_requirements(peers: ModuleType) -> None:
    a = peers.venv_dir(peers.Peer("x", ("a==1",)))
    b = peers.venv_dir(peers.Peer("x", ("a==2",)))
    assert a != b and a.parent == b.parent and a.name.startswith("x-")
