"""Forgetting is seen everywhere at once: after a forget, no context, search, synopsis,
fact, summary or cache of any process holds the forgotten text (SQLite, PostgreSQL,
Redis, a second real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from embedders import HashEmbedder
from test_memory import pg_url
from tiermem.memory import Memory

SECRET = "sencha"
DAY = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
QUERIES = ["What tea do I like?", "sencha", "favourite tea", "Where do I live?", "tell me"]
TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"


def settings(cache: str, namespace: str) -> dict[str, Any]:
    synopsis: dict[str, Any] = {"backend": cache, "namespace": namespace}
    if cache == "redis":
        synopsis["redis_url"] = "redis://127.0.0.1:6379/0"
    return {
        "buffer": {"size": 4, "summary_batch": 2},
        "facts": {"enabled": True, "batch": 2, "extractor": "offline"},
        "synopsis": synopsis,
    }


def open_memory(store: str, memory_settings: dict[str, Any]) -> Memory:
    persistent: dict[str, Any] = (
        {"provider": "postgresql", "connection_string": store}
        if store.startswith("postgresql://")
        else {"path": store}
    )
    config = {"memory": {**memory_settings, "persistent": persistent}}
    return Memory(config=config, embedder=HashEmbedder(32))


class Reader:
    """tests/procs/reader.py: another process sharing the store and the cache."""

    def __init__(self, store: str, memory_settings: dict[str, Any], user: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
        script = str(TESTS / "procs" / "reader.py")
        self.proc = subprocess.Popen(
            [sys.executable, script, store, json.dumps(memory_settings), user],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def read(self, query: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(query + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def faces(memory: Memory, user: str, query: str) -> dict[str, Any]:
    """Every text a user of this process sees."""
    return {
        "context": memory.get_context(query, user, "s1").text(),
        "search": [h.record.content for h in memory.search(query, user)],
        "synopsis": memory.synopsis(user).render(),
        "facts": [f.content for f in memory.facts(user, current=False)],
        "history": [m.text for m in memory.history(user, "s1")],
        "summary": memory.store.transcript.summary(user, "s1").text,
        "memories": [r.content for r in memory.store.index.list(user, limit=1000)],
    }


def holding(seen: dict[str, Any]) -> list[str]:
    """The faces whose text holds the secret."""
    return [name for name, value in seen.items() if SECRET in json.dumps(value).lower()]


def fill(memory: Memory, user: str) -> str:
    """A session whose facts, summary and synopsis learn the secret; its message id."""
    lines = [
        "I live in Porto.",
        "My favourite tea is sencha.",
        "I work as a nurse.",
        "I have two cats.",
        "I play the cello.",
        "I run on Sundays.",
        "I read crime novels.",
        "I bake bread at home.",
    ]
    secret_id = ""
    for i, text in enumerate(lines):
        message = memory.add("user", text, user, "s1", timestamp=DAY + timedelta(minutes=i))
        if SECRET in text:
            secret_id = message.message_id
    memory.remember("Ana prefers window seats.", user, "preference")
    assert memory.flush(30)
    memory.extract_facts(user, "s1")
    assert memory.flush(30)
    return secret_id


@pytest.fixture
def redis_namespace() -> Iterator[str]:
    from conformance.test_synopsis_cache import redis_reachable

    if not redis_reachable():
        pytest.skip("Redis is not reachable on 127.0.0.1:6379 (CI starts it)")
    name = f"tm-forget-{uuid.uuid4().hex[:10]}"
    yield name
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    for key in client.scan_iter(f"{name}:*"):
        client.delete(key)
    client.close()


def redis_values(namespace: str) -> list[str]:
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0", decode_responses=True)
    try:
        return [str(client.get(k)) for k in client.scan_iter(f"{namespace}:*")]
    finally:
        client.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
@pytest.mark.parametrize("how", ["forget_messages", "forget", "forget_session"])
@pytest.mark.parametrize("cache", ["redis", "memory"])
def test_a_forgotten_message_is_in_no_face_of_any_process(
    tmp_path: Path, redis_namespace: str, engine: str, how: str, cache: str
) -> None:
    store = str(tmp_path / "m.db") if engine == "sqlite" else pg_url()
    memory_settings = settings(cache, redis_namespace)
    memory = open_memory(store, memory_settings)
    user = f"ana-{uuid.uuid4().hex[:8]}"
    reader = None
    try:
        secret_id = fill(memory, user)
        reader = Reader(store, memory_settings, user)
        before = [faces(memory, user, q) for q in QUERIES]
        assert {"facts", "synopsis", "summary"} <= {f for s in before for f in holding(s)}
        assert any(holding(reader.read(q)) for q in QUERIES)  # the other process cached it
        if cache == "redis":
            assert any(SECRET in v for v in redis_values(redis_namespace))
        if how == "forget_messages":
            assert memory.forget_messages(user, [secret_id]) == 1
        elif how == "forget":
            (row,) = [
                r
                for r in memory.store.index.list(user, limit=100)
                if SECRET in r.content and r.memory_type == "message"
            ]
            assert memory.forget(str(row.id), user)
        else:
            assert memory.forget_session(user, "s1") == 8
        assert memory.flush(30)  # the worker writes the summary again, without it
        held = [(q, holding(faces(memory, user, q))) for q in QUERIES]
        held += [(q, holding(reader.read(q))) for q in QUERIES]
        assert [h for h in held if h[1]] == []
        if cache == "redis":
            assert not any(SECRET in v for v in redis_values(redis_namespace))
        if how != "forget_session":  # what the other messages taught stays
            assert "Porto" in json.dumps(faces(memory, user, "Where do I live?"))
    finally:
        if reader is not None:
            reader.close()
        memory.forget_user(user)
        memory.close()
