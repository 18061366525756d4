"""``/v1/context`` on PostgreSQL: the served native async path answers as ``get_context``
(the sync path in this process) and as a server whose store reads run in threads."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from conformance.conftest import pg_url  # noqa: F401  (the session-wide PostgreSQL)
from embedders import HashEmbedder
from liveserver import live_server
from tiermem.memory import Memory
from tiermem.server import create_app
from tiermem.wire import context_to_json


def _memory(url: str, native: bool) -> Memory:
    persistent = {"provider": "postgresql", "connection_string": url, "native_async": native}
    config = {"memory": {"persistent": persistent, "worker": {"background": False}}}
    return Memory(config=config, embedder=HashEmbedder(32))


@pytest.fixture
def served(pg_url: str, tmp_path: Any) -> Iterator[dict[bool, tuple[str, Memory]]]:  # noqa: F811
    with ExitStack() as stack:
        found = {}
        for native in (True, False):
            memory = _memory(pg_url, native)
            stack.callback(memory.close)
            app = create_app(memory, keys=str(tmp_path / f"keys-{native}.db"))
            found[native] = (stack.enter_context(live_server(app)), memory)
        yield found


def _items(context: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((i["source"], i["content"]) for i in context["items"])


def test_context_route_on_postgres_is_native_and_answers_as_get_context(
    served: dict[bool, tuple[str, Memory]],
) -> None:
    user = f"u-{uuid.uuid4()}"
    url, memory = served[True]
    assert memory.store.native_async and not served[False][1].store.native_async
    memory.add_messages(
        [{"role": "user", "content": f"I keep bees in the garden, note {i}"} for i in range(6)],
        user,
        "s1",
    )
    memory.remember("allergic to bee stings", user, "fact")
    memory.flush(30)
    asked = {"user_id": user, "session_id": "s1", "query": "bees", "max_tokens": 500}
    native = httpx.post(url + "/v1/context", json=asked, timeout=30)
    threads = httpx.post(served[False][0] + "/v1/context", json=asked, timeout=30)
    assert native.status_code == threads.status_code == 200, native.text
    local = context_to_json(memory.get_context("bees", user, "s1", 500))
    assert _items(native.json()) == _items(threads.json()) == _items(local)
    assert native.json()["messages"] == local["messages"]
    bad = httpx.post(url + "/v1/context", json={**asked, "session_id": "x\x00"}, timeout=30)
    same = httpx.post(served[False][0] + "/v1/context", json={**asked, "session_id": "x\x00"})
    assert bad.status_code == same.status_code == 422
    assert bad.json()["error"] == same.json()["error"]
