"""The tiermem command: every subcommand, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_no_command_prints_help(capsys) -> None:
    code, out, _ = run(capsys)
    assert code == 2 and "demo" in out and "migrate-embeddings" in out


def test_import_is_light() -> None:
    heavy = ("numpy", "torch", "tiktoken", "httpx", "pydantic")
    code = f"import sys, tiermem; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_name_resolves() -> None:
    import tiermem

    for name in tiermem.__all__:
        assert getattr(tiermem, name) is not None
    with pytest.raises(AttributeError):
        tiermem.NoSuchThing  # noqa: B018


def test_config_check_masks_secrets(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PG_URI", "postgresql://u:hunter2@db/tiermem")
    path = tmp_path / "tiermem.yaml"
    path.write_text(
        "memory:\n  persistent:\n    provider: postgresql\n"
        "    connection_string: ${{ secrets.PG_URI }}\n"
    )
    code, out, _ = run(capsys, "config", "check", str(path))
    assert code == 0 and "memory.persistent.provider" in out
    assert "hunter2" not in out


def test_config_check_names_the_bad_key(capsys, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("memory:\n  persistent:\n    provider: mongodb\n")
    code, _, err = run(capsys, "config", "check", str(path))
    assert code == 1 and "memory.persistent.provider" in err


def test_forget_needs_an_id_or_all(capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "forget", "--user", "u", "--db", str(tmp_path / "m.db"))
    assert code == 1 and "--id" in err


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("broken.json", '[{"role": "user"'),
        ("broken.jsonl", '{"role": "user"}\n{oops'),
        ("obj.json", '{"x": 1}'),
    ],
)
def test_import_rejects_malformed_files(capsys, tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run(capsys, "import", str(path), "--user", "u", "--db", str(tmp_path / "m.db"))
    assert code == 1 and name in err


def test_migrate_reports_an_unreachable_database(capsys) -> None:
    code, _, err = run(
        capsys,
        "migrate-embeddings",
        "--from-dim",
        "1536",
        "--to-dim",
        "384",
        "--to-model",
        "local/all-MiniLM-L6-v2",
        "--connection-string",
        "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1",
    )
    assert code == 1 and "error" in err


def test_chat_without_a_model_says_what_to_configure(capsys, monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(""))
    code, out, err = run(capsys, "chat", "--buffer-only")
    assert code == 2
    assert "chat" in (out + err) and "model" in (out + err)


@pytest.mark.slow
def test_demo_shows_every_tier(capsys) -> None:
    code, out, _ = run(capsys, "demo")
    assert code == 0
    for part in ("Buffer", "Running summary", "Long-term store", "synopsis", "get_context"):
        assert part in out
    assert "Moinho Velho" in out


@pytest.mark.slow
def test_round_trip_import_search_context_forget(capsys, tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    history = tmp_path / "history.jsonl"
    rows = [
        {
            "role": "user",
            "content": "I adopted a greyhound named Pixel.",
            "timestamp": "2024-04-02T10:00:00+00:00",
        },
        {"role": "assistant", "content": "Pixel is a lovely name!"},
        {"role": "user", "content": "My sister Ana lives in Porto."},
    ]
    history.write_text("\n".join(json.dumps(r) for r in rows))
    assert run(capsys, "import", str(history), "--user", "ana", "--db", db)[0] == 0
    assert run(capsys, "add", "I am learning Portuguese.", "--user", "ana", "--db", db)[0] == 0
    assert (
        run(
            capsys,
            "remember",
            "Prefers tea to coffee.",
            "--user",
            "ana",
            "--type",
            "preference",
            "--db",
            db,
        )[0]
        == 0
    )
    code, out, _ = run(capsys, "search", "what dog do I have", "--user", "ana", "--db", db)
    assert code == 0 and "Pixel" in out
    code, out, _ = run(
        capsys, "context", "where does my sister live", "--user", "ana", "--db", db, "--json"
    )
    assert code == 0 and "Porto" in out and json.loads(out)
    code, out, _ = run(capsys, "synopsis", "--user", "ana", "--db", db)
    assert code == 0 and "tea" in out
    code, out, _ = run(capsys, "stats", "--user", "ana", "--db", db)
    assert code == 0 and "message" in out and "preference" in out
    code, out, _ = run(capsys, "search", "greyhound", "--user", "someone-else", "--db", db)
    assert "Pixel" not in out
    code, out, _ = run(capsys, "forget", "--user", "ana", "--all", "--db", db)
    assert code == 0 and "erased 5" in out
