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


async def test_native_context_answers_as_get_context_on_every_path(
    pg_url: str,  # noqa: F811
) -> None:
    """The native gather's paths: a query not embedded yet (the vector search follows the
    reads' batch), the same query again (its cached vector joins the batch), a message not
    indexed yet (embedded on its own) and an empty query (no searches)."""
    user = f"u-{uuid.uuid4()}"
    memory = _memory(pg_url, True)
    try:
        memory.add_messages(
            [{"role": "user", "content": f"I keep bees in the garden, note {i}"} for i in range(6)],
            user,
            "s1",
        )
        memory.flush(30)
        memory.add("user", "my hives sit under the old pear tree", user, "s2")  # not indexed
        for query in ("where are my hives?", "where are my hives?", ""):
            native = context_to_json(await memory.aget_context(query, user, "s1", 500))
            local = context_to_json(memory.get_context(query, user, "s1", 500))
            assert _items(native) == _items(local)
            assert native["messages"] == local["messages"]
        found = await memory.aget_context("where are my hives?", user, "s1", 500)
        assert any("pear tree" in item.content for item in found.items)
    finally:
        await memory.aclose()


def test_a_lone_context_awaits_the_native_path_on_a_native_store(
    served: dict[bool, tuple[str, Memory]],
) -> None:
    """One request at a time: the native server awaits ``aget_context`` (one round trip,
    less than the sync path's reads), the thread-hop server runs ``get_context`` on its
    loop (its async twin would be that call in a thread)."""
    user = f"u-{uuid.uuid4()}"
    calls: dict[bool, list[str]] = {True: [], False: []}
    for native, (_, memory) in served.items():
        memory.sessions(user)  # the store is built on first use
        assert memory.native_async is native
        for name in ("get_context", "aget_context"):
            original = getattr(memory, name)
            if name == "get_context":

                def sync(*args: Any, _o: Any = original, _n: bool = native, **kw: Any) -> Any:
                    calls[_n].append("get_context")
                    return _o(*args, **kw)

                memory.get_context = sync  # type: ignore[method-assign]
            else:

                async def awaited(
                    *args: Any, _o: Any = original, _n: bool = native, **kw: Any
                ) -> Any:
                    calls[_n].append("aget_context")
                    return await _o(*args, **kw)

                memory.aget_context = awaited  # type: ignore[method-assign]
    memory = served[True][1]
    memory.remember("allergic to bee stings", user, "fact")
    for url, _ in served.values():
        asked = {"user_id": user, "query": "bees", "max_tokens": 500}
        answer = httpx.post(url + "/v1/context", json=asked, timeout=30)
        assert answer.status_code == 200 and answer.json()["items"]
    assert calls == {True: ["aget_context"], False: ["get_context"]}
