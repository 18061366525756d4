"""Export and import of one user (docs/export.md) on real SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from embedders import HashEmbedder
from test_memory import pg_url
from tiermem.errors import InputError, InvalidTypeError, MissingUserError
from tiermem.memory import Memory
from tiermem.memory.export import dumps
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.sqlite import SQLiteStore

DAY = datetime(2024, 5, 1, 9, 30, tzinfo=timezone.utc)
CONFIG = {
    "memory": {
        "buffer": {"size": 4, "summary_batch": 2},
        "facts": {"enabled": True, "batch": 2, "extractor": "offline"},
    }
}


def user() -> str:
    return f"user-{uuid.uuid4().hex[:10]}"


def sqlite_memory(tmp_path: Path, dimension: int = 32) -> Memory:
    return Memory(
        str(tmp_path / f"m{dimension}.db"), config=CONFIG, embedder=HashEmbedder(dimension)
    )


def pg_memory(dimension: int = 32) -> Memory:
    embedder = HashEmbedder(dimension)
    store = PostgresStore(pg_url(), dimension=dimension, embedder=embedder)
    memory = Memory(config=CONFIG, store=store, embedder=embedder)
    memory._tiers.owns_store = True  # closed with the Memory
    return memory


def fill(memory: Memory, who: str) -> None:
    """Two sessions with tool calls and metadata, facts, a summary and remembered memories."""
    lines = [
        ("user", "I am Ana and I live in Lisbon.", "s1"),
        ("assistant", "Nice to meet you, Ana.", "s1"),
        ("user", "My favourite tea is sencha.", "s1"),
        ("assistant", "Sencha it is.", "s1"),
        ("user", "I moved to Porto last week.", "s1"),
        ("assistant", "Porto is lovely.", "s1"),
        ("user", "Book a table for two.", "s2"),
    ]
    for i, (role, text, session) in enumerate(lines):
        memory.add(
            role,
            text,
            who,
            session,
            timestamp=DAY + timedelta(minutes=i),
            metadata={"n": i, "tags": ["a", "b"]},
        )
    memory.add(
        "assistant",
        "",
        who,
        "s2",
        timestamp=DAY + timedelta(minutes=9),
        tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{}"}}
        ],
    )
    memory.add(
        "tool", "booked", who, "s2", timestamp=DAY + timedelta(minutes=10), tool_call_id="c1"
    )
    memory.remember("Ana prefers window seats.", who, "preference", 0.8, metadata={"k": 1.5})
    memory.remember("Ana is vegetarian.", who, "fact", 0.7, session_id="s2", agent_id="planner")
    assert memory.flush(30)
    memory.extract_facts(who, "s1")
    memory.end_session(who, "s1")
    assert memory.flush(30)


def archive(memory: Memory, who: str, **options: Any) -> list[str]:
    """The archive as text lines, without the header's creation time."""
    out = []
    for line in memory.export(who, **options):
        if line["kind"] == "header":
            line = {**line, "created_at": None}
        out.append(dumps(line))
    return out


def test_sqlite_to_postgres_and_back_gives_the_same_archive(tmp_path: Path) -> None:
    who = user()
    source = sqlite_memory(tmp_path)
    target = pg_memory()
    try:
        fill(source, who)
        first = archive(source, who, include_vectors=True)
        kinds = [json.loads(x)["kind"] for x in first]
        assert kinds[0] == "header" and kinds[-1] == "end"
        assert {"message", "summary", "fact_mark", "memory"} <= set(kinds)
        assert any('"memory_type": "fact"' in x and "valid_from" in x for x in first)
        added = target.import_archive(first)
        assert added["messages"] == 9 and added["memories"] > 0
        assert target.flush(30)
        assert archive(target, who, include_vectors=True) == first
        # twice: nothing more
        assert target.import_archive(first) == {"messages": 0, "memories": 0}
        assert archive(target, who, include_vectors=True) == first
        assert target.history(who, "s2") == source.history(who, "s2")
        assert [f.content for f in target.facts(who)] == [f.content for f in source.facts(who)]
    finally:
        source.close()
        target.forget_user(who)
        target.close()


def test_another_model_embeds_again_and_a_new_user_id_takes_the_archive(tmp_path: Path) -> None:
    who, other = user(), user()
    source = sqlite_memory(tmp_path)
    target = sqlite_memory(tmp_path, dimension=16)
    try:
        fill(source, who)
        lines = archive(source, who, include_vectors=True)
        target.import_archive(lines, user_id=other)
        hits = target.search("window seats", other, k=3)
        assert hits and hits[0].record.content == "Ana prefers window seats."
        assert len(hits[0].record.embedding) == 16
        assert target.history(other, "s1")[0].metadata["user_id"] == other
        assert target.sessions(who) == []
    finally:
        source.close()
        target.close()


def bad(lines: list[str], number: int, **change: Any) -> list[str]:
    copy = list(lines)
    copy[number - 1] = dumps({**json.loads(copy[number - 1]), **change})
    return copy


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_damaged_or_foreign_archive_fails_whole_with_its_line(
    tmp_path: Path, engine: str
) -> None:
    who = user()
    source = sqlite_memory(tmp_path)
    target = sqlite_memory(tmp_path, 8) if engine == "sqlite" else pg_memory(8)
    try:
        fill(source, who)
        lines = archive(source, who)
        last_memory = max(i for i, x in enumerate(lines, 1) if '"kind": "memory"' in x)
        cases = {
            "line 1": ['{"kind": "header", "format": "mem0"}', *lines[1:]],
            "line 1.version": bad(lines, 1, version=99),
            "line 3": [*lines[:2], "{not json", *lines[3:]],
            f"line {last_memory}.content": bad(lines, last_memory, content=""),
            f"line {last_memory}.importance": bad(lines, last_memory, importance="high"),
            "line 2.message": bad(lines, 2, message={"role": "wizard", "content": "x"}),
            f"line {len(lines)}": lines[:-1],  # truncated: no end line
            f"line {len(lines) + 1}": [*lines, lines[1]],  # something after the end
        }
        for where, broken in cases.items():
            with pytest.raises(InputError) as caught:
                target.import_archive(broken)
            assert caught.value.field.startswith(where), (where, caught.value)
        assert target.sessions(who) == [] and target.store.index.count(who) == 0
        with pytest.raises(InvalidTypeError):
            target.import_archive(lines[0])  # one string, not lines
        with pytest.raises(InputError):
            target.import_archive([])
        with pytest.raises(MissingUserError):
            target.import_archive(lines, user_id="  ")
        with pytest.raises(MissingUserError):
            list(target.export(""))
        with pytest.raises(InvalidTypeError):
            list(target.export(who, include_vectors="yes"))  # type: ignore[arg-type]
    finally:
        source.close()
        target.close()


def test_export_of_a_user_holds_nobody_else(tmp_path: Path) -> None:
    memory = sqlite_memory(tmp_path)
    try:
        ana, bob = user(), user()
        fill(memory, ana)
        memory.add("user", "Bob's secret is zanzibar-quokka.", bob, "s1")
        memory.remember("Bob likes jazz.", bob)
        assert memory.flush(30)
        text = "\n".join(archive(memory, ana))  # (a word, not digits a random id may hold)
        assert "Bob" not in text and "quokka" not in text and bob not in text
        assert isinstance(memory.store, SQLiteStore)
    finally:
        memory.close()


# -- through the real server --------------------------------------------------------


def test_server_export_import_and_forget_through_rest_and_both_clients(tmp_path: Path) -> None:
    import asyncio

    import httpx

    from liveserver import live_server
    from tiermem.client import AsyncMemoryClient, MemoryClient
    from tiermem.server import create_app

    memory = sqlite_memory(tmp_path)
    who = user()
    with live_server(create_app(memory, own_memory=True)) as url:
        client = MemoryClient(url)
        fill(memory, who)
        lines = [dumps(x) for x in client.export(who, include_vectors=True)]
        assert json.loads(lines[0])["user_id"] == who and json.loads(lines[-1])["kind"] == "end"
        raw = httpx.get(f"{url}/v1/users/{who}/export")
        assert raw.headers["content-type"].startswith("application/x-ndjson")
        assert client.import_archive(lines) == {"messages": 0, "memories": 0}  # twice: nothing
        client.forget_user(who)
        assert client.import_archive(lines)["messages"] == 9
        again = [dumps(x) for x in client.export(who, include_vectors=True)]
        assert again[1:] == lines[1:]

        async def twin() -> list[dict[str, Any]]:
            async with AsyncMemoryClient(url) as aclient:
                assert await aclient.aimport_archive(lines) == {"messages": 0, "memories": 0}
                return [x async for x in aclient.aexport(who)]

        assert len(asyncio.run(twin())) == len(lines)
        # bad input: the same typed errors as Memory, nothing written
        other = user()  # another user's archive is restored as a copy, as by Memory
        copied = client.import_archive(lines, user_id=other)
        assert copied == client.import_archive(lines, user_id=other) | copied  # idempotent
        assert client.stats(other).count == client.stats(who).count
        assert {str(r.id) for r in client.list_memories(other)}.isdisjoint(
            str(r.id) for r in client.list_memories(who)
        )
        fresh = user()
        with pytest.raises(InputError, match="line 2"):
            client.import_archive([lines[0], "{oops", *lines[2:]], user_id=fresh)
        with pytest.raises(InputError):
            client.import_archive([], user_id=fresh)
        assert client.stats(fresh).count == 0
        with pytest.raises(InvalidTypeError):
            client.import_archive("one string")  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError):
            list(client.export(who, include_vectors="yes"))  # type: ignore[arg-type]
        huge = httpx.post(f"{url}/v1/users/{fresh}/import", content=b"x" * 3_000_000)
        assert huge.status_code == 422 and huge.json()["field"] == "line 1"
        assert client.sessions(fresh) == []
        # forgetting through REST: the context, search and synopsis lose the text
        secret = [
            r for r in memory.store.index.list(who, limit=100) if "sencha" in r.content.lower()
        ]
        secret.sort(key=lambda r: r.memory_type != "fact")  # forgetting a fact's source
        # message takes the fact with it: change the facts first
        assert client.get_context("favourite tea", who, "s1").text().count("sencha")
        for record in secret:
            if record.memory_type == "fact":
                patched = httpx.patch(
                    f"{url}/v1/memories/{record.id}",
                    params={"user_id": who},
                    json={"content": "Ana drinks water."},
                )
                assert patched.status_code == 200, patched.text
            else:
                assert client.forget(str(record.id), who)
        assert client.flush(30)
        for query in ("favourite tea", "sencha", "what do I drink"):
            seen = client.get_context(query, who, "s1").text()
            seen += json.dumps([h.record.content for h in client.search(query, who)])
            seen += client.synopsis(who).render()
            assert "sencha" not in seen.lower(), seen
        client.close()
