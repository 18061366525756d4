"""The tiermem command: every subcommand, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from embedders import HashEmbedder
from tiermem import Memory
from tiermem.cli import main
from tiermem.cli.commands import pick_id, resolve_id, short_ids, stored_id
from tiermem.errors import AmbiguousIdError, InputError, NotFoundError


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


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (
            "h.jsonl",
            '{"role": "user", "content": "a"}\n\n{"role": "bogus", "content": "b"}',
            "h.jsonl:3 role",
        ),
        (
            "h.jsonl",
            '{"role": "user", "content": "a"}\n{"role": "user", "content": ""}',
            "h.jsonl:2 content",
        ),
        (
            "h.json",
            '[{"role": "user", "content": "a"},\n {"role": "user", "content": ""}]',
            "h.json message 2 content",
        ),
        ("h.json", '[{"role": "user", "content": "a"},\n {"role": "user",]', "h.json:2"),
        ("h.jsonl", '{"role": "user", "content": "a"}\n{oops', "h.jsonl:2"),
    ],
)
def test_import_errors_count_lines_and_messages_from_1(
    capsys, tmp_path: Path, name: str, text: str, where: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run(capsys, "import", str(path), "--user", "u", "--db", str(tmp_path / "m.db"))
    assert code == 1 and f"error: {where}" in " ".join(err.split())


def test_keys_import_the_key_store_only(tmp_path: Path) -> None:
    """`tiermem keys` touches one small table: no FastAPI, no server app."""
    code = (
        "import sys\n"
        "from tiermem.cli import main\n"
        f"assert main(['keys', 'list', '--db', {str(tmp_path / 'k.db')!r}]) == 0\n"
        "print(sorted(m for m in ('fastapi', 'starlette', 'tiermem.server.app', 'uvicorn')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


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


def test_serve_on_a_busy_port_fails_at_once(capsys, tmp_path: Path) -> None:
    """The port is checked before anything loads: one error line, no uvicorn traceback,
    and no store opened (the --db file is not created)."""
    import socket
    import time

    db = tmp_path / "never.db"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        start = time.monotonic()
        code, out, err = run(capsys, "serve", "--port", str(port), "--db", str(db))
        took = time.monotonic() - start
    text = " ".join(err.split())
    assert code == 1 and out == "", err
    assert text == (
        f"error: --port: 127.0.0.1:{port} is already in use, by another tiermem serve or "
        f"another program (stop it, or choose another port: --port {port + 1})"
    )
    assert not db.exists() and took < 2  # neither the store nor the model was loaded


def test_serve_on_an_address_of_another_machine_fails_at_once(capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "serve", "--host", "192.0.2.1", "--db", str(tmp_path / "x.db"))
    assert code == 1
    assert " ".join(err.split()).startswith("error: --host: 192.0.2.1 is not an address of")


@pytest.mark.slow
def test_demo_shows_every_tier(capsys) -> None:
    code, out, _ = run(capsys, "demo")
    assert code == 0
    for part in (
        "Buffer",
        "Running summary",
        "Long-term store",
        "synopsis",
        "get_context",
        "tiermem serve",
        "pip install 'tiermem[server]'",  # rich markup would swallow an unescaped [server]
    ):
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
    code, out, _ = run(capsys, "add", "I am learning Portuguese.", "--user", "ana", "--db", db)
    added = out.split()[1]  # "added <id> for user 'ana'"
    assert code == 0 and len(added) == 36
    code, out, _ = run(capsys, "search", "learning Portuguese", "--user", "ana", "--db", db)
    prefix = next(
        w
        for line in out.splitlines()
        if "Portuguese" in line
        for w in line.split()
        if added.startswith(w) and len(w) >= 8
    )
    code, out, _ = run(capsys, "forget", "--id", prefix, "--user", "ana", "--db", db)
    assert code == 0 and f"forgotten {added}" in out
    code, out, _ = run(capsys, "forget", "--id", added, "--user", "ana", "--db", db)
    assert code == 1  # already gone
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
    code, out, _ = run(  # issue 35, item 4: the answer scored 0.500 beside unrelated 0.492
        capsys, "search", "what dog do I have", "--min-score", "0.2", "--user", "ana", "--db", db
    )
    assert code == 0 and "greyhound" in out
    assert not any(w in out for w in ("lovely", "Porto", "Portuguese", "tea")), out
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


# -- one id per memory, and a --db that is really there ---------------------------


@pytest.mark.parametrize(
    "command", [["search", "x"], ["add", "hello"], ["stats"], ["context", "x"]]
)
def test_db_in_a_missing_folder_is_refused_and_nothing_is_created(
    capsys, tmp_path: Path, command: list[str]
) -> None:
    db = tmp_path / "no-such-folder" / "m.db"
    code, _, err = run(capsys, *command, "--user", "u", "--db", str(db))
    assert code == 1 and "--db" in err and "does not exist" in " ".join(err.split())
    assert list(tmp_path.iterdir()) == []


def test_db_that_is_a_folder_is_refused(capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "stats", "--user", "u", "--db", str(tmp_path))
    assert code == 1 and "is a folder" in " ".join(err.split())  # rich wraps long lines
    assert run(capsys, "demo", "--db", str(tmp_path / "nope" / "d.db"))[0] == 1


def test_short_ids_are_unique_prefixes_of_at_least_8() -> None:
    ids = sorted(["abcdef0123-1", "abcdef0123-2", "12345678-aaaa", "99999999-bbbb"])
    shown = short_ids(ids, ids)
    assert shown["12345678-aaaa"] == "12345678"
    assert shown["abcdef0123-1"] == "abcdef0123-1" and shown["abcdef0123-2"] == "abcdef0123-2"
    assert short_ids(ids[:1], ids[:1]) == {ids[0]: ids[0][:8]}


def test_one_id_from_add_to_search_to_forget(tmp_path: Path) -> None:
    memory = Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32))
    try:
        message = memory.add("user", "I adopted a greyhound named Pixel.", "ana")
        first = stored_id(memory, "ana", message)
        assert first is not None and memory.store.index.get("ana", first).content.endswith("Pixel.")
        again = memory.add("user", "I adopted a greyhound named Pixel.", "ana")
        assert stored_id(memory, "ana", again) == first  # the same text is one memory
        others = [memory.remember(f"fact number {i}", "ana") for i in range(40)]
        all_ids = sorted([first, *others])
        shown = short_ids(all_ids, all_ids)
        for full, prefix in shown.items():
            assert resolve_id(memory, "ana", prefix) == full
            assert resolve_id(memory, "ana", prefix.upper()) == full
        assert resolve_id(memory, "ana", first) == first
        with pytest.raises(NotFoundError):
            resolve_id(memory, "bob", shown[first])  # another user's memory is not found
        with pytest.raises(InputError, match="not a memory id"):
            resolve_id(memory, "ana", "zz-top")
        with pytest.raises(InputError, match="not a memory id"):
            resolve_id(memory, "ana", "ab")  # too short to mean one memory
    finally:
        memory.close()


def test_a_prefix_of_several_ids_is_ambiguous() -> None:
    ids = ["0a1b2c3d-0000-4000-8000-000000000001", "0a1b2c3d-0000-4000-8000-000000000002"]
    with pytest.raises(AmbiguousIdError, match="give more of the id") as info:
        pick_id("0A1B2C3D", ids, "ana")
    assert "starts 2 ids" in str(info.value) and info.value.field == "--id"
    assert pick_id("0a1b2c3d-0000-4000-8000-000000000002", ids, "ana") == ids[1]
    with pytest.raises(NotFoundError):
        pick_id("ffff", ids, "ana")


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["context", "flour?", "--user", "u", "--max-tokens", "-5"], "--max-tokens"),
        (["search", "flour", "--user", "u", "-k", "0"], "-k"),
        (["demo", "--max-tokens", "-1"], "--max-tokens"),
        (["remember", "x", "--user", "u", "--importance", "1.5"], "--importance"),
        (["search", "flour", "--user", "u", "--min-score", "1.5"], "--min-score"),
    ],
)
def test_bad_numbers_are_refused_before_anything_heavy_loads(
    argv: list[str], option: str, tmp_path: Path
) -> None:
    """No model, store, token table or NumPy: the refusal comes first."""
    code = (
        "import sys\n"
        "from tiermem.cli import main\n"
        f"code = main({[*argv, *(['--db', str(tmp_path / 'm.db')] if argv[0] != 'demo' else [])]!r})\n"
        "heavy = ('numpy', 'onnxruntime', 'tiktoken', 'torch', 'sqlite3', 'tiermem.cli.demo')\n"
        "print(code, [m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "1 []", out.stderr
    assert f"{option}: must be" in out.stderr
    assert not (tmp_path / "m.db").exists()


def test_export_then_import_restores_the_user_and_refuses_a_damaged_archive(
    capsys, tmp_path: Path
) -> None:
    import json

    first, second = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    assert run(capsys, "add", "I adopted a greyhound.", "--user", "u", "--db", first)[0] == 0
    archive = tmp_path / "u.jsonl"
    code, _, _ = run(capsys, "export", "--user", "u", "--db", first, "-o", str(archive))
    assert code == 0
    lines = archive.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "tiermem-archive"
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], '{"kind": "message"}', *lines[1:]]))
    code, _, err = run(capsys, "import", str(broken), "--user", "u", "--db", second)
    assert code == 1 and "line 2" in err
    code, out, _ = run(capsys, "import", str(archive), "--user", "u", "--db", second)
    assert code == 0 and "restored 1 messages" in out
    code, out, _ = run(capsys, "export", "--user", "u", "--db", second)
    again = out.splitlines()
    assert code == 0 and again[1:] == lines[1:]


def test_users_sessions_and_memories_list_what_the_library_returns(capsys, tmp_path: Path) -> None:
    """Issue 35, item 5: `tiermem users`, `tiermem sessions USER` and `tiermem memories
    USER` are Memory.users, Memory.sessions and Memory.list_memories: `--json` prints
    their values (as the REST API writes them), the paging and filters are the library's
    own, and so are the errors."""
    from tiermem.errors import InvalidSizeError, MissingUserError
    from tiermem.wire import record_to_json, session_to_json

    db = str(tmp_path / "cli.db")
    with Memory(db) as memory:
        memory.add_messages(
            [
                {"role": "user", "content": "I moved to Porto in May"},
                {"role": "assistant", "content": "Porto is lovely."},
            ],
            "ana",
            "trip",
        )
        memory.add("user", "A line without a session", "ana")
        memory.remember("Ana prefers tea to coffee", "ana", "preference")
        memory.remember("Bo likes jazz", "bo", "preference")
        assert memory.flush(30)
        users = memory.users()
        sessions = memory.sessions("ana")
        records = memory.list_memories("ana")
        trip = memory.list_memories("ana", session_id="trip")
        with pytest.raises(InvalidSizeError) as too_few:
            memory.list_memories("ana", limit=0)
        with pytest.raises(MissingUserError) as nobody:
            memory.sessions("")
    assert users == ["ana", "bo"] and len(sessions) == 2 and len(records) == 4

    code, out, err = run(capsys, "users", "--db", db)
    assert (code, out.splitlines(), err) == (0, users, "")
    assert json.loads(run(capsys, "users", "--db", db, "--json")[1]) == users
    code, out, err = run(capsys, "users", "--db", db, "--limit", "1")
    assert out.splitlines() == ["ana"] and 'more: tiermem users --after "ana"' in err
    assert run(capsys, "users", "--db", db, "--after", "ana")[1].splitlines() == ["bo"]

    code, out, _ = run(capsys, "sessions", "ana", "--db", db, "--json")
    assert code == 0 and json.loads(out) == [session_to_json(s) for s in sessions]
    assert run(capsys, "sessions", "--user", "ana", "--db", db, "--json")[1] == out
    code, out, _ = run(capsys, "sessions", "ana", "--db", db)
    assert code == 0 and "trip" in out and "(none)" in out

    code, out, _ = run(capsys, "memories", "ana", "--db", db, "--json")
    assert code == 0 and json.loads(out) == [record_to_json(r) for r in records]
    code, out, _ = run(capsys, "memories", "ana", "--db", db, "--session", "trip", "--json")
    assert json.loads(out) == [record_to_json(r) for r in trip]
    code, out, _ = run(capsys, "memories", "--user", "ana", "--db", db, "--type", "preference")
    assert "Ana prefers tea to coffee" in out and "Porto" not in out
    assert str(records[0].id)[:8] in out  # the id `forget --id` takes, as search shows it
    code, out, err = run(capsys, "memories", "ana", "--db", db, "--limit", "1", "--offset", "1")
    assert records[1].content[:20] in out and records[0].content[:20] not in out
    assert "more: --offset 2" in err
    code, out, _ = run(capsys, "memories", "ana", "--db", db, "--metadata", '{"nope": 1}')
    assert code == 0 and out == ""

    for argv, said in [
        (("memories", "ana", "--limit", "0"), f"error: {too_few.value}"),
        (("users", "--limit", "0"), f"error: {too_few.value}"),
        (("sessions", ""), f"error: {nobody.value}"),
        (("memories", "ana", "--type", "gossip"), "error: memory_type: 'gossip' is not a"),
        (("memories", "ana", "--created-after", "May"), "error: --created-after: 'May' is not"),
        (("memories", "ana", "--metadata", "[1]"), "error: --metadata: expected a JSON object"),
    ]:
        code, out, err = run(capsys, *argv, "--db", db)
        assert code == 1 and out == "" and " ".join(err.split()).startswith(said), (argv, err)
    for argv in (("sessions",), ("memories", "ana", "--user", "bo")):  # one user, given once
        with pytest.raises(SystemExit) as usage:
            main([*argv, "--db", db])
        assert usage.value.code == 2
