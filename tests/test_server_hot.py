"""The lean path of ``POST /v1/messages`` and ``POST /v1/context`` (server/hot.py): the
answers FastAPI's response models would give, FastAPI's errors for anything refused, the
metrics' route label, and a lone context run without a thread hop."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from embedders import HashEmbedder
from tiermem.memory import Memory
from tiermem.server import create_app, models
from tiermem.server.keys import KeyStore
from tiermem.server.run import frozen


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32))
    yield memory
    memory.close()


async def _requests(app: Any, calls: list[tuple[str, Any, dict[str, str]]]) -> list[Any]:
    """The calls at once, through the app's lifespan."""
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://t") as http,
    ):
        return await asyncio.gather(
            *(http.post(path, json=body, headers=headers) for path, body, headers in calls)
        )


def _post(app: Any, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    return asyncio.run(_requests(app, [(path, body, headers or {})]))[0]


def test_answers_are_what_the_response_models_give(memory: Memory) -> None:
    app = create_app(memory, mcp=False)
    said = {"user_id": "ana", "session_id": "s", "messages": [{"role": "user", "content": "hi"}]}
    added = _post(app, "/v1/messages", said, {"content-type": "application/json; charset=utf-8"})
    assert added.status_code == 201
    assert models.IdsOut.model_validate(added.json()).model_dump(mode="json") == added.json()
    memory.remember("Ana's dog is called Pixel", "ana")
    asked = {"user_id": "ana", "session_id": "s", "query": "dog?", "max_tokens": 200}
    context = _post(app, "/v1/context", asked)
    assert context.status_code == 200 and context.headers["content-type"] == "application/json"
    assert context.json()["items"]
    checked = models.ContextOut.model_validate(context.json()).model_dump(mode="json")
    assert checked == context.json()
    metrics = asyncio.run(_get(app, "/metrics")).text
    for route in ("/v1/messages", "/v1/context"):
        assert f'route="{route}",status="20' in metrics


async def _get(app: Any, path: str) -> Any:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        return await http.get(path)


@pytest.mark.parametrize(
    ("body", "headers", "status", "error"),
    [
        ({"user_id": "ana", "query": "q", "extra": 1}, {}, 422, "InvalidTypeError"),
        ({"user_id": "ana", "query": 3}, {}, 422, "InvalidTypeError"),
        ({"user_id": "", "query": "q"}, {}, 422, "MissingUserError"),  # the endpoint's own
        ({"user_id": "ana", "query": "q"}, {"content-type": "text/plain"}, 422, None),
    ],
)
def test_what_is_refused_is_answered_as_before(
    memory: Memory, body: Any, headers: dict[str, str], status: int, error: str | None
) -> None:
    app = create_app(memory, mcp=False)
    if headers:  # a body not sent as JSON goes to FastAPI whatever it holds
        answer = asyncio.run(_raw(app, b'{"user_id": "ana", "query": "q"}', headers))
    else:
        answer = _post(app, "/v1/context", body)
    assert answer.status_code == status
    if error is not None:
        assert answer.json()["error"] == error


async def _raw(app: Any, content: bytes, headers: dict[str, str]) -> Any:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        return await http.post("/v1/context", content=content, headers=headers)


def test_a_lone_context_needs_no_thread_and_overlapping_ones_await(memory: Memory) -> None:
    memory.remember("Ana's dog is called Pixel", "ana")
    awaited = 0
    original = memory.aget_context

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal awaited
        awaited += 1
        return await original(*args, **kwargs)

    memory.aget_context = counted  # type: ignore[method-assign]
    app = create_app(memory, mcp=False)
    asked = {"user_id": "ana", "query": "dog?"}
    assert _post(app, "/v1/context", asked).status_code == 200
    assert awaited == 0  # alone: get_context on the loop
    answers = asyncio.run(_requests(app, [("/v1/context", asked, {})] * 4))
    assert [a.status_code for a in answers] == [200] * 4
    assert awaited == 4  # started together: each awaits aget_context


def test_a_tenant_user_is_noted_without_a_sync_and_keys_stay_synced(tmp_path: Path) -> None:
    keys = KeyStore(str(tmp_path / "keys.db"))
    try:
        keys.note_user("acme", "ana")
        assert keys.users("acme") == ["ana"]
        assert keys._run("PRAGMA synchronous") == [(2,)]  # FULL again for keys
    finally:
        keys.close()


def test_the_served_app_is_frozen_out_of_full_collections(memory: Memory) -> None:
    app = create_app(memory, mcp=False)
    try:
        assert frozen(app) is app
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
